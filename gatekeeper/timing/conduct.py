"""The trusted parent's side of timing: two workers, timed in alternating blocks.

1. The reference's worker starts alone: device facts, calibration (when not cached), counts,
   the base input sets; then it is timed alone (`reference_alone`), before the submission's
   worker exists, so nothing the submission could run on the device touches that series.
2. The submission's worker starts (set up as the checking worker is, gatekeeper.sandbox.prelude),
   receives the input sets and the initial arguments, and warms up.
3. Blocks of calls alternate between the two workers (which goes first alternates too), until
   the adaptive rule (gatekeeper.timing.adaptive) is satisfied or the budget runs out. Call
   indices run on across blocks, so no input repeats within either process
   (gatekeeper.timing.fresh). After each block one call index, drawn here after the block
   ran, has its sampled outputs reported by both workers, for the comparison.
Everything decided is decided here; the workers only measure and report.
"""

from __future__ import annotations

import os
import secrets
import select
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from gatekeeper.sandbox.channel import ChannelError
from gatekeeper.sandbox.runner import Job, JobResult, job_rss_mb, kill_job
from gatekeeper.timing.adaptive import Sampled, StopRule, sample_until_stable

ALONE_BASE = 1 << 40  # call indices of the reference's private calls: never the paired ones
STOP_KINDS = ("error", "no-model", "call-error")


class Worker:
    """A started Job read incrementally: `expect(kind)` returns its next message of that kind."""

    def __init__(self, job: Job, name: str) -> None:
        self.job, self.name = job, name
        self.pos = 0
        self.ended = False
        self.failed: Optional[str] = None

    def send(self, message: dict[str, Any], close: bool = False) -> None:
        # Written from a thread (a worker that does not read cannot block the parent). Every
        # command is answered before the next is sent, so two writes never overlap.
        self.job.feed(message, close=close)

    def send_now(self, message: dict[str, Any]) -> None:
        """A command with no answer: wait for its write, so the next command cannot overtake it."""
        self.job.feed(message, close=False)
        self.job.flush(10)

    def expect(self, kind: str, timeout_s: float) -> Optional[dict[str, Any]]:
        result = self.job.result
        deadline = time.monotonic() + timeout_s
        next_poll = 0.0
        while True:
            while self.pos < len(result.messages):
                message = result.messages[self.pos]
                self.pos += 1
                if message.get("kind") == kind:
                    return message
                if message.get("kind") in STOP_KINDS:
                    self.failed = message.get("kind")
                    return None
            if self.ended:
                return None
            now = time.monotonic()
            if now > deadline:
                result.status, result.detail = "timeout", f"phase '{result.phase}' ran past its {timeout_s:g} s limit"
                kill_job(self.job.proc)
                self.ended = True
                return None
            cap = self.job.rss_cap_mb
            if cap and now >= next_poll:
                next_poll = now + 0.25
                rss = job_rss_mb(self.job.proc.pid, self.job.warm_child)
                if rss > cap:
                    result.status = "memory"
                    result.detail = f"resident memory {rss:.0f} MiB over the {cap} MiB cap in phase '{result.phase}'"
                    kill_job(self.job.proc)
                    self.ended = True
                    return None
            ready, _, _ = select.select([self.job.read_fd], [], [], min(0.25, max(0.0, deadline - now)))
            if not ready:
                if self.job.proc.poll() is not None and not select.select([self.job.read_fd], [], [], 1.0)[0]:
                    self._crashed()
                continue
            data = os.read(self.job.read_fd, 1 << 20)
            if not data:
                self._crashed()
                continue
            try:
                messages = self.job.reader.feed(data)
            except ChannelError as exc:
                result.status, result.detail = "forged", str(exc)
                kill_job(self.job.proc)
                self.ended = True
                return None
            for message in messages:
                if message.get("kind") == "phase":
                    result.phase = str(message.get("phase", "?"))
                elif message.get("kind") == "done":
                    result.status = "ok"
                    self.ended = True
                else:
                    result.messages.append(message)

    def _crashed(self) -> None:
        result = self.job.result
        if result.status != "ok":
            result.status = "crashed"
            result.detail = (f"the worker ended in phase '{result.phase}' without its signed 'done' message "
                             f"(exit code {self.job.proc.poll()})")
        self.ended = True

    def finish(self) -> JobResult:
        """Tell the worker to stop and collect what is left; a worker that already failed is
        cleaned up with its status kept."""
        if not self.ended:
            self.send({"op": "stop"}, close=True)
            return self.job.wait()
        status, detail = self.job.result.status, self.job.result.detail
        if status == "ok":
            return self.job.wait()
        result = self.job.kill()
        result.status, result.detail = status, detail
        return result


@dataclass
class Plan:
    """What the parent needs besides the two jobs' own parameters."""

    rule: StopRule
    warmup_calls: int
    idle_s: float  # how long a worker may take for one command
    start_s: float = 600.0  # how long a worker may take to start (imports, calibration, loading extensions)
    per_tensor: int = 4096
    checks_per_block: int = 1
    graph: bool = False  # CUDA-graph replays per call (settings.mode == "graph")
    flush_factor: float = 2.0  # L2 flush buffer over the L2 size


@dataclass
class Outcome:
    reference: Optional[JobResult] = None
    submission: Optional[JobResult] = None
    failed: Optional[str] = None  # "reference" | "submission" when that worker failed
    messages: dict[str, Any] = field(default_factory=dict)  # device, calibration, counts, inputs summary
    alone: Sampled = field(default_factory=Sampled)
    paired: Sampled = field(default_factory=Sampled)
    reference_synced_us: list[float] = field(default_factory=list)
    submission_synced_us: list[float] = field(default_factory=list)
    spin_us: float = 0.0
    host_call_us: dict[str, float] = field(default_factory=dict)
    persisting_l2_limit: int = 0
    l2_reset: dict[str, Any] = field(default_factory=dict)  # per side: "ok" or the CUDA errors
    mode: str = "events"
    graph_error: Optional[str] = None
    calls: int = 0  # distinct call indices the submission saw
    input_sets: int = 0
    checks: list[tuple[dict[str, Any], dict[str, Any]]] = field(default_factory=list)  # (submission, reference)


class _Blocks:
    """The sampler for the adaptive rule: one alternating block per request."""

    def __init__(self, ref: Worker, sub: Optional[Worker], plan: Plan, start: int, spin_us: float,
                 outcome: Outcome) -> None:
        self.ref, self.sub, self.plan = ref, sub, plan
        self.next, self.spin_us, self.out = start, spin_us, outcome
        self.count = 0
        self.rng = secrets.SystemRandom()

    def _block(self, worker: Worker, start: int, n: int, seed: int) -> dict[str, Any]:
        worker.send({"op": "block", "start": start, "calls": n, "spin_us": self.spin_us, "gather_seed": seed})
        got = worker.expect("block", self.plan.idle_s)
        if got is None:
            raise _WorkerFailed(worker.name)
        return got

    def __call__(self, n: int) -> tuple[list[float], list[float]]:
        start, seed = self.next, secrets.randbelow(2**31)
        self.next += n
        order = [self.ref, self.sub] if self.count % 2 == 0 else [self.sub, self.ref]
        self.count += 1
        got = {w.name: self._block(w, start, n, seed) for w in order if w is not None}
        ref = got["reference"]
        if self.sub is None:
            return ref["event_us"], list(ref["event_us"])
        sub = got["submission"]
        self.out.reference_synced_us.extend(ref["synced_us"])
        self.out.submission_synced_us.extend(sub["synced_us"])
        self.out.persisting_l2_limit = max(self.out.persisting_l2_limit, int(sub.get("persisting_l2_limit") or 0))
        self.out.l2_reset = {"reference": ref.get("l2_reset"), "submission": sub.get("l2_reset")}
        picked = sorted(self.rng.sample(range(start, start + n), min(self.plan.checks_per_block, n)))
        answers = {}
        for w in (self.sub, self.ref):
            w.send({"op": "report", "indices": picked})
            answer = w.expect("samples", self.plan.idle_s)
            if answer is None:
                raise _WorkerFailed(w.name)
            answers[w.name] = {int(o["index"]): o for o in answer["outputs"]}
        for i in picked:
            self.out.checks.append((answers["submission"].get(i, {"index": i, "tensors": None}),
                                    answers["reference"].get(i, {"index": i, "tensors": None})))
        return ref["event_us"], sub["event_us"]


class _WorkerFailed(Exception):
    pass


def _adopt_now(worker: Worker, message: dict[str, Any]) -> dict[str, Any]:
    """The reference's input sets, adopted while its worker still runs (it never imported the
    submission): large tensors arrive as files in its transfer folder (gatekeeper.sandbox.spill),
    and `Job.feed` copies them into the submission's worker's own folder."""
    job = worker.job
    if getattr(job, "spill_dir", None) is None:
        return message
    from gatekeeper.sandbox.spill import adopt_tree

    try:
        adopted = adopt_tree(message, str(job.spill_dir), job.spill_fd)
    except Exception as exc:  # SpillError, an OS error: the inputs cannot be trusted
        job.result.detail = f"the input sets sent as files failed their check: {exc}"
        raise _WorkerFailed(worker.name) from exc
    # In place (the reader's position counts messages): a stub, so nothing is adopted twice.
    job.result.messages[:] = [{"kind": "inputs-adopted"} if m is message else m for m in job.result.messages]
    return adopted


def _warm(worker: Worker, start: int, calls: int, plan: Plan, graph: bool) -> Optional[dict[str, Any]]:
    worker.send({"op": "warmup", "start": start, "calls": calls, "graph": graph})
    return worker.expect("warm", plan.idle_s)


def run(start_reference: Callable[[], Job], start_submission: Callable[[], Job], plan: Plan,
        now: Callable[[], float] = time.monotonic) -> Outcome:
    """The whole measurement; see the module docstring. Workers are always finished."""
    out = Outcome()
    ref = Worker(start_reference(), "reference")
    sub: Optional[Worker] = None
    try:
        inputs = ref.expect("inputs", plan.start_s)
        if inputs is None:
            out.failed = "reference"
            return out
        inputs = _adopt_now(ref, inputs)
        for kind in ("device", "calibration", "counts"):
            found = next((m for m in ref.job.result.messages if m.get("kind") == kind), None)
            if found is not None:
                out.messages[kind] = found
        out.input_sets = len(inputs["sets"])
        warm = _warm(ref, ALONE_BASE, plan.warmup_calls, plan, plan.graph)
        if warm is None:
            out.failed = "reference"
            return out
        out.host_call_us["reference"] = float(warm["host_call_us"])
        out.mode = warm.get("mode", "events")
        if warm.get("graph_error"):  # the reference itself cannot be captured: plain launches on both sides
            out.graph_error = f"the reference could not be captured ({warm['graph_error']})"
        alone_blocks = _Blocks(ref, None, plan, int(warm["next"]), max(20.0, 2 * warm["host_call_us"]), out)
        out.alone = sample_until_stable(alone_blocks, plan.rule, now, sides=(True, False))

        sub = Worker(start_submission(), "submission")
        sub.send({**{k: inputs[k] for k in ("init", "init_seed", "key", "sets")}, "flush_factor": plan.flush_factor})
        del inputs
        if sub.expect("ready", plan.start_s) is None:
            out.failed = "submission"
            return out
        warm_sub = _warm(sub, 0, plan.warmup_calls, plan, out.mode == "graph")
        if warm_sub is None:
            out.failed = "submission"
            return out
        out.host_call_us["submission"] = float(warm_sub["host_call_us"])
        if out.mode == "graph" and warm_sub.get("mode") != "graph":
            # The submission cannot be captured: both sides on plain launches, and the report says so.
            out.mode, out.graph_error = "events", warm_sub.get("graph_error")
            ref.send_now({"op": "events"})
            out.alone = Sampled()  # timed as graph replays: no longer comparable with the paired series
        # Queue at least twice the slowest host issue time ahead of each start event.
        out.spin_us = max(20.0, 2 * max(out.host_call_us.values()))
        blocks = _Blocks(ref, sub, plan, int(warm_sub["next"]), out.spin_us, out)
        try:
            out.paired = sample_until_stable(blocks, plan.rule, now)
        except _WorkerFailed as exc:
            out.failed = str(exc)
            return out
        out.calls = blocks.next
    except _WorkerFailed as exc:
        out.failed = str(exc)
    finally:
        out.reference = ref.finish()
        if sub is not None:
            out.submission = sub.finish()
    return out
