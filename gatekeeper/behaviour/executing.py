"""Attribution by executing code in the behaviour stage (issue 22 item 3), CPU runs.

Worker side: the submission's worker arms the program-counter sampler
(gatekeeper.runtime.pc_sampler) once, right after importing the submission, and keeps it
armed for the whole run, so that every call (checked trial, scheduled call) runs under the
same timer: nothing tells a sampled call from another. `executing()` marks the stretches to
keep: the submission's forward calls. At the end, `report()` sends one `executing` message
with the classes of what ran.

Parent side: `judge()` turns that message into the report's `work.executing` section and,
when the submission's own code ran for almost none of the compute samples, into the same
finding the dispatcher-based attribution gives (GK667), naming the objects that did run.
A replaced SIGPROF handler, a disarmed timer or blocked signals are interference (GK650).
"""

from __future__ import annotations

import contextlib
import os
from signal import SIGPROF
from typing import TYPE_CHECKING, Any, Iterator, Optional

if TYPE_CHECKING:  # parent side only: the worker must not import the report schema (pydantic)
    from gatekeeper.report import Finding, Location

from gatekeeper.behaviour.sample_shares import (  # noqa: F401 - re-exported for the parent and tests
    ALPHA, COMPUTE, DEFAULT_MIN_OWN_SHARE, MEANINGFUL_SHARE, MIN_SAMPLES, upper_bound,
)

_sampler: Any = None
_calls: list[tuple[int, int]] = []  # per forward call, in order: where its samples begin and end


def start(params: dict[str, Any], device: str) -> None:
    """In the worker, after the submission's import. CPU only: on a GPU the host PC says
    nothing about device work (CUPTI attributes kernels there)."""
    global _sampler
    library = params.get("pc_sampler")
    if not library or not device.startswith("cpu"):
        return
    try:
        from gatekeeper.runtime.pc_sampler import Sampler

        _sampler = Sampler(library)
        _calls.clear()
        _sampler.start()
    except OSError:
        _sampler = None


BLOCKING_MIN_S, BLOCKING_SHARE = 0.02, 0.05  # CPU a blocking thread must use to hide work: 20 ms and 5%
_OWN_THREADS: set[str] = set()  # the worker's threads before the submission was imported
_BLOCKING: dict[str, str] = {}  # tid -> name of a later thread seen blocking SIGPROF
_SEEN_BLOCKED: dict[str, int] = {}  # tid -> scans in a row that saw it block SIGPROF (not yet in _BLOCKING)
BLOCKED_SCANS = 2


def note_threads() -> None:
    """Before the submission loads: the threads that are the worker's own."""
    _OWN_THREADS.update(_tids())


def _tids() -> list[str]:
    try:
        return os.listdir("/proc/self/task")
    except OSError:
        return []


def scan_blocked_threads() -> None:
    """Threads started since the submission loaded that block SIGPROF. The sampler's timer
    counts the whole process's CPU time, but its signal goes only to a thread that does not block
    it: work on a thread that blocks it is never sampled, and a spinning thread beside it takes
    every sample (red team round 6, h07). Called between calls, never inside one."""
    if _sampler is None:
        return
    bit = 1 << (SIGPROF - 1)
    for tid in _tids():
        if tid in _OWN_THREADS or tid in _BLOCKING:
            continue
        try:
            with open(f"/proc/self/task/{tid}/status", encoding="ascii", errors="replace") as fh:
                status = fh.read(4096)
        except OSError:
            continue  # it ended meanwhile
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        try:
            blocked = int(fields.get("SigBlk", "0").strip(), 16) & bit
        except ValueError:
            continue
        # A thread that has not run yet blocks every signal: glibc starts a new thread with all
        # of them blocked until it sets its creator's mask, and on a loaded machine that can take
        # milliseconds (a torch pool thread seen so once was a GK650 on honest code). It has
        # hidden nothing: it is looked at again at the next scan, once it has used CPU.
        # A thread blocks every signal for a moment whenever it starts a thread of its own
        # (glibc's pthread_create), and a torch pool thread caught so once was a GK650 on honest
        # code (2026-12-07, rt6_own_gemm_on_worker_thread_cpp under load): only a thread seen
        # blocking it in consecutive scans is blocking it. One that blocks it only while it
        # computes is the sampler's signal-count check (pc_sampler.Sampler._hiding).
        if blocked and _cpu_ticks(tid) > 0:
            _SEEN_BLOCKED[tid] = _SEEN_BLOCKED.get(tid, 0) + 1
            if _SEEN_BLOCKED[tid] >= BLOCKED_SCANS:
                _BLOCKING[tid] = fields.get("Name", "?").strip()[:40]
        else:
            _SEEN_BLOCKED.pop(tid, None)


def _cpu_ticks(tid: int) -> int:
    """Clock ticks of CPU (user + system) a thread of this process has used; 0 when it ended."""
    try:
        with open(f"/proc/self/task/{tid}/stat", encoding="ascii", errors="replace") as fh:
            fields = fh.read(4096).rsplit(")", 1)[-1].split()
        return int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of stat)
    except (OSError, ValueError, IndexError):
        return 0


def _blocking_cpu_s() -> float:
    """CPU seconds the SIGPROF-blocking threads have used (those still alive)."""
    return sum(_cpu_ticks(tid) for tid in _BLOCKING) / os.sysconf("SC_CLK_TCK")


def active() -> bool:
    """Whether the sampler is armed in this worker (a CPU run with the sampler library)."""
    return _sampler is not None


@contextlib.contextmanager
def executing() -> Iterator[None]:
    """Around one forward call: its samples are kept."""
    if _sampler is None:
        yield
        return
    begin = _sampler.count()
    _sampler.record(True)
    try:
        yield
    finally:
        _sampler.record(False)
        _calls.append((begin, _sampler.count()))


def report(channel: Any, params: dict[str, Any]) -> None:
    """At the end of the worker's run: one `executing` message."""
    global _sampler
    if _sampler is None:
        return
    scan_blocked_threads()
    sampler, _sampler = _sampler, None
    samples = sampler.stop()
    submission = params.get("submission") or ""
    roots = [os.environ.get("TORCH_EXTENSIONS_DIR", ""), os.path.dirname(os.path.realpath(submission))]
    classes: list[str] = []
    from gatekeeper.behaviour.own_modules import LOADED_INODES, own_extension_files

    attribution = sampler.attribute(samples, roots, classes, own_extension_files(), LOADED_INODES)
    sampler.remove_jit_map()
    # Per forward call, in call order: its compute samples by class (COMPUTE's order). The
    # parent judges groups of calls too (behaviour.executing_groups): a share pooled over
    # the run lets slow own calls hide fast library ones.
    per_call = [[classes[b:e].count(c) for c in COMPUTE] for b, e in _calls]
    channel.send("executing", intact=samples.intact, suppressed=samples.suppressed,
                 blocking_threads=sorted(set(_BLOCKING.values()))[:8], blocking_cpu_s=round(_blocking_cpu_s(), 4),
                 hiding_threads=[[name, used] for name, used in samples.hiding[:8]],
                 cpu_s=round(samples.cpu_s, 4), signals=samples.signals, calls=per_call, **attribution.to_json())


def _before_loop(calls: Any, messages: list[dict[str, Any]]) -> Optional[tuple[int, int]]:
    """(own, compute) samples of the calls outside the timing loop, or None without a loop (or
    when the calls cannot be matched to their labels)."""
    from gatekeeper.behaviour.executing_groups import LOOP_LABEL, call_labels

    if not isinstance(calls, list) or not calls:
        return None
    labels = call_labels(messages)
    if len(labels) != len(calls) or LOOP_LABEL not in labels:
        return None
    rows = [row for row, label in zip(calls, labels) if label != LOOP_LABEL and isinstance(row, list)]
    own = sum(int(row[0]) for row in rows if row)
    compute = sum(int(x) for row in rows for x in row[:len(COMPUTE)])
    return own, compute


def judge(messages: list[dict[str, Any]], settings: dict[str, Any],
          location: Optional[Location]) -> tuple[Optional[dict[str, Any]], list[Finding]]:
    """(the `work.executing` section or None, findings)."""
    from gatekeeper.report import StageName
    from gatekeeper.runtime.checks import finding

    stage = StageName.BEHAVIOUR

    seen = next((m for m in messages if m.get("kind") == "executing"), None)
    if seen is None:
        return None, []
    classes = dict(seen.get("classes") or {})
    compute = sum(classes.get(c, 0) for c in COMPUTE)
    own = classes.get("own", 0)
    section = {"samples": seen.get("samples", 0), "classes": classes, "objects": seen.get("objects", []),
               "symbols": seen.get("symbols", []),
               "own_share_of_compute": round(own / compute, 4) if compute else None}
    found: list[Finding] = []
    blocking = [str(name) for name in seen.get("blocking_threads") or []]
    # Only a blocking thread that worked hides work: one that sleeps (a signal-handling idiom) does not.
    hidden_s = float(seen.get("blocking_cpu_s") or 0.0)
    if hidden_s < max(BLOCKING_MIN_S, BLOCKING_SHARE * float(seen.get("cpu_s") or 0.0)):
        blocking = []
    # Threads that worked but drew almost none of the timer's signals (blocked only while working).
    hiding = [(str(h[0]), float(h[1])) for h in seen.get("hiding_threads") or [] if isinstance(h, list) and len(h) == 2]
    if hiding and not blocking:
        blocking = [name for name, _ in hiding]
        hidden_s = sum(used for _, used in hiding)
    if not seen.get("intact", True) or seen.get("suppressed") or blocking:
        what = ("the SIGPROF handler was replaced or the profiling timer disarmed during a call"
                if not seen.get("intact", True) else
                f"the profiling signal was blocked: {seen.get('signals', 0)} signals in {seen.get('cpu_s')} s of CPU"
                if seen.get("suppressed") else
                f"a thread started by the submission blocks the profiling signal ({', '.join(blocking)}) and used "
                f"{hidden_s:.2f} s of CPU, which the sampler can never attribute; unblock SIGPROF in worker threads")
        found.append(finding("GK650", stage, {"sampler": section}, location,
                             when="while forward ran", names=f"the work-attribution sampler ({what})"))
        return section, found
    before = _before_loop(seen.get("calls"), messages)
    if before is not None and before[1] >= MIN_SAMPLES:
        # The checked calls alone give enough samples: they are judged alone, as before the
        # timing loop existed; the loop's hundreds of calls count only when the run is too short
        # without them, and as a switch (executing_groups).
        own, compute = before
        section["judged_without_the_timing_loop"] = True
    if compute < MIN_SAMPLES:
        section["judged"] = False
        section["why_not"] = f"{compute} compute samples over the forward calls; at least {MIN_SAMPLES} are needed"
        return section, found
    section["judged"] = True
    minimum = float(settings.get("min_own_share_executing", DEFAULT_MIN_OWN_SHARE))
    bound = upper_bound(own, compute)
    section["own_share_upper_99"] = round(bound, 4)
    if own / compute < minimum and bound < MEANINGFUL_SHARE:
        others = ", ".join(f"{name} {n}" for name, n in seen.get("objects", [])[:4])
        top = ", ".join(f"{name} {n}" for name, n in seen.get("symbols", [])[:3])
        detail = (f"sampled while forward ran, the submission's own code executed {own} of {compute} compute "
                  f"samples ({own / compute:.1%}); the rest ran in {others}" + (f" (top symbols: {top})" if top else ""))
        found.append(finding("GK667", stage, {"executing": section}, location, detail=detail,
                             trial="the sampled forward calls"))
        return section, found
    from gatekeeper.behaviour.executing_groups import judge_groups

    worst = judge_groups(seen.get("calls"), messages, minimum)
    if worst is not None:
        section["group"] = worst
        rest = ", ".join(f"{name} {n}" for name, n in worst["classes"].items() if name != "own" and n)
        detail = (f"sampled while forward ran, the submission's own code executed {worst['own']} of "
                  f"{worst['compute']} compute samples there ({worst['own'] / worst['compute']:.1%}, against "
                  f"{own / compute:.1%} pooled over all calls); the rest ran in {rest}")
        convicted = finding("GK667", stage, {"executing": section}, location, detail=detail, trial=worst["name"])
        # A group's name reads as it is, not as a trial's ("the call '...'")
        convicted.message = convicted.message.replace(f"the call {worst['name']!r}", worst["name"])
        found.append(convicted)
    return section, found
