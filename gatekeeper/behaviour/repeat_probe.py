"""The repeated-contents probe (issue 22 item 5): a memo keyed by a checksum of the input's
contents is right on every input, so no value check can see it; it only skips the work when
contents repeat, which is exactly what a timing harness that reuses its inputs gives it.

The call schedule (problem.schedule) makes a few `repeat` calls: new tensor objects holding
exactly the contents of an earlier fresh call; and a few `again` calls: the call before's very
tensor objects, unmodified, as a timing loop passes them (a memo keyed on identity and
`_version` hits there). Every scheduled call's wall time comes back
with it. When the repeat calls are much faster than fresh calls of the same inputs' shape,
the submission did less work on contents it had seen: a cached-output finding, on CPU and GPU
alike. Honest code does the same work on the same contents; the base call ran many calls
earlier, so no cache of the submission's data is warmer for the repeat than for a fresh call.

Each kind is represented by its fastest call, not its median: on a loaded machine a call's
wall time grows by however long the worker was descheduled, never shrinks, so the fastest
call is the one closest to the work it did. Medians followed the load instead: with two busy
processes on two cores, the fresh calls (spread over the whole schedule) were slowed more than
the repeats (all among calls 6-23), and an honest GEMM's repeats measured 1538 us against a
7001 us fresh median, a GK678 on honest code. A memo's repeats are fast every time, so its
fastest repeat is as far below the fastest fresh call as its median was.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from statistics import median
from typing import Any, Callable

from gatekeeper.problem.schedule import MIN_LARGE_CALLS

MIN_REPEATS = 3
MIN_FRESH = 6
RATIO = 0.25  # the fastest repeat call under a quarter of the fastest fresh call's time
# The shortest schedule (problem.schedule.MIN_LARGE_CALLS, a problem over 8 MiB a call) holds
# 2 repeats and 3 plain fresh calls after the first three: judged from those, with a stricter
# ratio for the fewer samples. A memo's repeat is a lookup, far under either ratio.
SHORT_MIN_REPEATS, SHORT_MIN_FRESH, SHORT_FIRST_FRESH = 2, 3, 3
SHORT_RATIO = 0.15
MIN_FRESH_CPU_S = 100e-6  # the calling thread's CPU on a fresh call, for its CPU times to count
LONG_CALL_S, LONG_RATIO = 1e-3, 0.5  # a fresh call of 1 ms or more: a repeat under half of it (h09: 0.35)
MIN_FRESH_S = 200e-6  # a fastest fresh call below this: timer noise and call overhead decide, not judged
LOOP_TAIL = 16  # the loop calls just before each probe that it is compared with
# The loop against its probes: under 0.4 of the fastest probe. A probe's new contents cost honest
# code something the loop's repeated ones do not: branch predictors trained on the loop's data
# (an own ReLU epilogue after a torch GEMM ran 1.8x slower on a probe than on a loop call, 100 us
# against 180 us, in one process, no checks between). A memo that still does a third of the
# work (h09 of round 6, 0.35) is under it.
LOOP_PROBE_RATIO = 0.4


@dataclass
class RepeatProbe:
    reference: dict[str, Any]
    walls: dict[int, float] = field(default_factory=dict)
    # `again` calls are timed on the CPU only. On a GPU an honest CUDA graph keyed on the inputs'
    # addresses captures on every fresh call (new addresses) and only replays on an `again` call
    # (the same ones), so it is faster there with all the work done: not judged by time until
    # the launches of the call back it (a gap in docs/threat-model.md).
    time_again: bool = True
    # The timing loop's calls (behaviour.timing_loop), timed where `again` calls
    # are: the same tensors back to back, as long as a benchmark's loop.
    loop: list[float] = field(default_factory=list)
    # The schedule's last plain fresh calls, the loop's probes (their indices): a finding that
    # rests on the loop alone needs the loop's calls just before each to beat these too, which
    # ran under the same load. Empty when the schedule ended otherwise (a short or trimmed one).
    after_indices: list[int] = field(default_factory=list)
    # The calling thread's CPU time of the same calls: another process's load stretches wall
    # times, never these, so a finding needs both to say it (a loaded machine once slowed every
    # fresh call of an honest run 5x: red team round 6, n04). The process's CPU time alone
    # would not do: another thread still running when the call returns is counted only up to
    # the scheduler's last tick.
    cpus: dict[int, float] = field(default_factory=dict)
    loop_cpus: list[float] = field(default_factory=list)
    # The whole process's CPU time of the same calls. A caller that hands most of the work to
    # another thread and sleeps (or does a fixed share itself) spends the same CPU on a memo's
    # hit and miss: only the process's time shows what the other threads skipped (red team
    # round 8: h04, h06, h07). A call ends with its helpers idle, so their time is up to date
    # then. Either clock agreeing with the wall is enough; the veto needs both to disagree.
    pcpus: dict[int, float] = field(default_factory=dict)
    loop_pcpus: list[float] = field(default_factory=list)
    # Where the probes ran (behaviour.timing_loop): the number of loop calls before each.
    probes_at: list[int] = field(default_factory=list)

    def observe(self, message: dict[str, Any]) -> None:
        if message.get("kind") == "schedule-loop" and self.time_again:
            self.loop = [float(w) for w in message.get("walls") or [] if isinstance(w, (int, float)) and w >= 0]
            self.loop_cpus = [float(c) for c in message.get("cpus") or [] if isinstance(c, (int, float)) and c >= 0]
            self.loop_pcpus = [float(c) for c in message.get("pcpus") or [] if isinstance(c, (int, float)) and c >= 0]
            self.after_indices = [int(i) for i in message.get("after") or [] if isinstance(i, int)][:64]
            at = [int(p) for p in message.get("probes_at") or [] if isinstance(p, int)]
            # Where each probe ran in the loop (loop calls before it); without it (or malformed)
            # the loop's tail is judged, as for probes that all ran at its end.
            ends = at[1:] + [len(self.loop)]
            ok = len(at) == len(self.after_indices) and all(0 <= a <= b <= len(self.loop) for a, b in zip(at, ends))
            self.probes_at = at if ok else []
            return
        if message.get("kind") != "schedule-call":
            return
        wall = message.get("wall_s")
        if isinstance(wall, (int, float)) and wall >= 0:
            self.walls[int(message["index"])] = float(wall)
        for key, into in (("cpu_s", self.cpus), ("pcpu_s", self.pcpus)):
            cpu = message.get(key)
            if isinstance(cpu, (int, float)) and cpu >= 0:
                into[int(message["index"])] = float(cpu)

    def _clocks(self) -> tuple[tuple[dict[int, float], list[float]], ...]:
        """(per scheduled call, per loop call) CPU times: the calling thread's, the process's."""
        return (self.cpus, self.loop_cpus), (self.pcpus, self.loop_pcpus)

    def _cpu_agrees(self, calls: dict[int, Any], first: int, timed: tuple[str, ...], ratio: float) -> bool:
        """Whether the calls' CPU times say what their wall times say: by either clock that
        measured work (True without CPU times)."""
        said = []
        for per_call, loop in self._clocks():
            fresh = [c for i, c in per_call.items() if calls.get(i, {}).get("kind") == "fresh"
                     and calls[i].get("dist") == "normal" and i >= first]
            repeats = [c for i, c in per_call.items() if calls.get(i, {}).get("kind") in timed] + loop
            if fresh and repeats and min(fresh) >= MIN_FRESH_CPU_S:  # else this clock waited while others worked
                said.append(min(repeats) < ratio * min(fresh))
        return not said or any(said)

    @property
    def after(self) -> list[float]:
        """Wall times of the loop's probes (the schedule's last plain fresh calls)."""
        return [self.walls[i] for i in self.after_indices if i in self.walls]

    def _windows(self, probes: int) -> list[range]:
        """The loop calls the probes are compared with: up to LOOP_TAIL just before each probe
        (from the last probe on), one window each; one window of the loop's tail where the
        positions are unknown (or every probe ran at its end)."""
        n = len(self.loop)
        at = [a for a in self.probes_at if a - LOOP_TAIL // 2 >= 0]
        if not at or len(set(at)) == 1:
            return [range(max(n - max(2 * probes, LOOP_TAIL), 0), n)]
        windows, start = [], 0
        for a in sorted(set(at)):
            windows.append(range(max(start, a - LOOP_TAIL), a))
            start = a
        return windows

    def _loop_beats_after(self, ratio: float) -> bool:
        """Whether the loop's calls just before its probes beat the probes, by wall and (where
        the calling thread works) by CPU time: in two windows at least and a quarter of them,
        judged by each window's median, never by one call. True when there are no probes.

        The probes (behaviour.timing_loop) are the same tensors with new contents, at positions
        drawn from the run's secret across the whole loop: as warm as the loop's calls and under
        the same load. A memo hits on the loop's calls and misses on the probes, in whichever
        part of the loop it is active; honest code takes the same time on both. Two windows: one
        quiet moment of the machine is not a memo.

        Medians: on a loaded machine a call's time is quantised by the scheduler's ticks (an
        honest worker-thread GEMM on two busy cores ran about 1 ms when both its threads held a
        core and 4 ms when one waited a tick), so the fastest of a few calls is a draw. The
        fastest of the loop's last seven calls once beat all seven probes by 4x (962 us against
        3,879 us): a GK678 on that honest code, in loaded runs only. A memo is fast on nearly
        every call before a probe."""
        after = self.after
        if not after:
            return True
        windows = self._windows(len(after))
        need = 1 if len(windows) == 1 else max(2, -(-len(windows) // 4))
        fast = [w for w in windows if len(w) and median(self.loop[i] for i in w) < ratio * min(after)]
        says = []  # per clock that measured work: the windows it finds fast too
        for per_call, loop in self._clocks():
            after_cpus = [per_call[i] for i in self.after_indices if i in per_call]
            if after_cpus and len(loop) == len(self.loop) and min(after_cpus) >= MIN_FRESH_CPU_S:
                says.append({id(w) for w in fast if median(loop[i] for i in w) < ratio * min(after_cpus)})
        if says:
            fast = [w for w in fast if any(id(w) in kept for kept in says)]
        return len(fast) >= need

    def _fresh(self, calls: dict[int, Any], first: int) -> list[float]:
        """Wall times of the plain fresh calls from `first` on (past the warm-up calls)."""
        return [w for i, w in self.walls.items() if calls.get(i, {}).get("kind") == "fresh"
                and calls[i].get("dist") == "normal" and i >= first]

    def judge(self, add: Callable[..., None]) -> dict[str, Any]:
        """Adds GK678 when repeats are much faster; returns what was measured (for the report)."""
        calls = {int(c["index"]): c for c in self.reference.get("calls", [])}
        short = len(calls) <= MIN_LARGE_CALLS
        need_repeats, need_fresh, first, ratio = (SHORT_MIN_REPEATS, SHORT_MIN_FRESH, SHORT_FIRST_FRESH, SHORT_RATIO) \
            if short else (MIN_REPEATS, MIN_FRESH, 4, RATIO)
        fresh = self._fresh(calls, first)
        timed = ("repeat", "again") if self.time_again else ("repeat",)
        repeats = [w for i, w in self.walls.items() if calls.get(i, {}).get("kind") in timed]
        again = [w for i, w in self.walls.items() if calls.get(i, {}).get("kind") == "again" and self.time_again]
        if not short and len(fresh) < need_fresh and len(self._fresh(calls, SHORT_FIRST_FRESH)) >= SHORT_MIN_FRESH:
            # A schedule trimmed to MIN_CALLS often holds fewer plain fresh calls than MIN_FRESH
            # (the value distributions and the repeats take their places): judged as the
            # shortest schedule is, with its stricter ratio, rather than not at all.
            need_repeats, need_fresh, first, ratio = SHORT_MIN_REPEATS, SHORT_MIN_FRESH, SHORT_FIRST_FRESH, SHORT_RATIO
            fresh = self._fresh(calls, first)
        measured = {"repeat_calls": len(repeats), "again_calls": len(again), "fresh_calls": len(fresh)}
        if len(repeats) < need_repeats or len(fresh) < need_fresh:
            measured["judged"] = False
            if self.walls:  # the schedule ran, too short for the probe: said, never a silent pass
                sent, planned = len(calls), int(self.reference.get("planned", 0) or 0)
                skipped = [str(s) for s in self.reference.get("skipped", []) or []]
                why = (f"; the schedule stopped early ({skipped[-1][:200]})" if skipped else
                       f"; the schedule's budgets kept {sent} of {planned} planned calls" if 0 < sent < planned
                       else "")
                add("GK679", "scheduled calls", dict(measured, sent=sent, planned=planned),
                    repeats=len(repeats), fresh=len(fresh), need_repeats=need_repeats, need_fresh=need_fresh, why=why)
            return measured
        if self.loop:
            measured["loop_calls"] = len(self.loop)
            repeats = repeats + self.loop
            if self.after:
                measured["loop_probe_calls"] = len(self.after)
        fresh_s, repeat_s = min(fresh), min(repeats)  # load only adds time: see the module's docstring
        if not short and fresh_s >= LONG_CALL_S:
            ratio = max(ratio, LONG_RATIO)  # calls of a millisecond and more: warm caches are no 2x
        # With probes the loop is judged at LOOP_PROBE_RATIO of a fresh call whatever the call's
        # length, where the schedule's own repeats keep a quarter under 1 ms: the probes ran inside
        # the loop, on its tensors, unpoisoned, as warm as its calls (behaviour.timing_loop), so the
        # 2x a tight loop gives honest calls of a few hundred microseconds over checked ones is
        # mostly not there; a memo that does a third of the work on calls just under 1 ms (h09 at
        # 0.98 ms) is caught.
        loop_ratio = LOOP_PROBE_RATIO if self.after else ratio
        measured.update(fresh_fastest_s=round(fresh_s, 7), repeat_fastest_s=round(repeat_s, 7),
                        fresh_median_s=round(median(fresh), 7), repeat_median_s=round(median(repeats), 7),
                        judged=True)
        if fresh_s < MIN_FRESH_S:
            return measured
        fast_repeat = any(w < ratio * fresh_s for i, w in self.walls.items()
                          if calls.get(i, {}).get("kind") == "repeat")
        fast_again = any(w < ratio * fresh_s for i, w in self.walls.items()
                         if calls.get(i, {}).get("kind") == "again" and self.time_again)
        if fast_repeat or fast_again:
            if not self._cpu_agrees(calls, first, timed, ratio):
                return measured
            what = ("calls on the very tensors of the call before, unmodified (what a timing loop passes), or on "
                    "new tensors repeating an earlier call's contents," if fast_again else
                    "calls whose inputs repeat an earlier call's contents (new tensors, same values)")
        elif self.loop and min(self.loop) < loop_ratio * fresh_s and self._cpu_agrees(calls, first, timed, loop_ratio):
            if not self._loop_beats_after(loop_ratio):
                measured["cleared_by_loop_probes"] = True
                return measured
            after = (f"; its {len(self.after)} probes, the same tensors with new contents at points drawn from the "
                     f"run's secret, took {min(self.after) * 1e6:.0f} us at the fastest" if self.after else "")
            what = (f"in a timing loop at the end of the schedule ({len(self.loop)} calls on the very same tensors, "
                    f"back to back{after}), calls")
        else:
            return measured
        how = ("a memo keyed by the contents returns stored results whenever a harness reuses its inputs"
               if fast_repeat else
               "code that skips its work when handed the same tensors again (a memo keyed by their identity "
               "and `_version`, or an output left to what the allocator hands back: the block of the result "
               "the caller just dropped) gains whenever a harness calls it in a loop")
        add("GK678", "scheduled calls", dict(measured), how=how,
            detail=(f"{what} took {repeat_s * 1e6:.0f} us (fastest of {len(repeats)}) against "
                    f"{fresh_s * 1e6:.0f} us for fresh contents (fastest of {len(fresh)})"))
        return measured
