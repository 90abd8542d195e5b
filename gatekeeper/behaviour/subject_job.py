"""The submission worker: imports the submission and reports what it observes around each call.

It decides nothing. The sequence (one fresh process; the reference never runs here, so the
submission always runs before any reference result could exist in its memory):
  nominal          call on inputs A
  nominal-second   call on inputs B; then: is A's output unchanged, does it share storage?
  repeat           call on a fresh copy of A: determinism
  nominal-overwrite  overwrite B's tensors in place (same data_ptr) with new values, call again
  jitter-*         one call each on the jittered inputs
Fresh allocations are poisoned (deterministic mode with fill_uninitialized_memory).
"""

from __future__ import annotations

import contextlib
import time
import traceback
from typing import Any, Optional

from gatekeeper.behaviour.attribution import Recorder
from gatekeeper.behaviour.observe import (
    Census, changed, identities, note_processes, started_processes, input_digests, overlaps, settle, storage_range, tensors_of,
)
from gatekeeper.problem.shims import install_shims
from gatekeeper.behaviour import executing
from gatekeeper.sandbox.loading import load_submission
from gatekeeper.sandbox.tensors import digest, pack, pack_tree, unpack_tree


def _poison() -> None:
    """NaN-fill fresh allocations (torch.empty, also from C++). The public
    `torch.use_deterministic_algorithms` imports torch._inductor (about 3 s); the flags it
    sets are these two, so set them directly when they exist."""
    import torch

    try:
        torch._C._set_deterministic_algorithms(True, warn_only=True)
        torch._C._set_deterministic_fill_uninitialized_memory(True)
    except (AttributeError, TypeError):
        torch.use_deterministic_algorithms(True, warn_only=True)
        torch.utils.deterministic.fill_uninitialized_memory = True


def report_processes(channel: Any, when: str) -> None:
    """A process the submission started and left running (a helper that serves calls from
    outside the worker, its samples and its checks: red team round 6, h03), said once per phase."""
    started = started_processes(_compile_worker)
    if started:
        channel.send("import-children", count=len(started), when=when)


def _compile_worker(pid: int) -> bool:
    """TorchInductor's compile workers are torch's, and multiprocessing's resource tracker is
    Python's (torch and Triton start it): not the submission's helpers."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            line = fh.read(4096)
    except OSError:
        return False
    return b"torch/_inductor" in line or b"multiprocessing.resource_tracker" in line


def _describe(out: Any, device: str) -> dict[str, Any]:
    import torch

    if type(out) is torch.Tensor:
        dense = out.is_contiguous() or out.is_non_overlapping_and_dense()
        return {"type": "torch.Tensor", "exact": True, "dense": bool(dense), "device": str(out.device),
                "dtype": str(out.dtype).replace("torch.", ""), "shape": list(out.shape),
                "stride": list(out.stride())}
    if isinstance(out, torch.Tensor):
        return {"type": f"{type(out).__module__}.{type(out).__qualname__}", "exact": False,
                "subclass_of_tensor": True}
    if isinstance(out, (tuple, list)):
        return {"type": type(out).__name__, "exact": False, "length": len(out),
                "items": [_describe(o, device) for o in out]}
    return {"type": f"{type(out).__module__}.{type(out).__qualname__}", "exact": False}


class Subject:
    def __init__(self, params: dict[str, Any], channel: Any) -> None:
        self.params = params
        self.channel = channel
        self.device = params["device"]
        self.baseline: dict[str, int] = {}
        self.model: Any = None
        self.init_key: Optional[str] = None
        self.earlier_outputs: list[tuple[str, Any]] = []

    def load(self) -> bool:
        import time

        began = time.perf_counter()
        import torch

        install_shims()
        from gatekeeper.sandbox.guard import guard_torch_files

        guard_torch_files()  # torch.from_file(shared=True) obeys the write rule too (issue 22 item 6)
        if self.params.get("poison", True):
            _poison()
        torch.set_grad_enabled(False)
        warm = torch.randn(64, 64)
        (warm @ warm).sum()  # start torch's own pools before counting threads
        if self.params.get("attribute", True):
            from gatekeeper.behaviour.attribution import warm_up
            from gatekeeper.behaviour.own_modules import watch_extension_loads
            from gatekeeper.runtime import kernel_owner

            # CUDA: the one CUPTI subscription is ours before the submission is imported
            kernel_owner.start(self.params, self.device if torch.cuda.is_available() else "cpu")

            watch_extension_loads()
            warm_up(self.device if self.device.startswith("cuda") and torch.cuda.is_available() else "cpu")
        from gatekeeper.runtime.build_phase import announce_builds
        from gatekeeper.sandbox.prelude import load_harness

        announce_builds(self.channel)  # a lazy load_inline compiles under the build limit, not init/call
        load_harness()  # the timing worker loads the same modules: the two look alike
        self.baseline = identities()
        executing.note_threads()  # the worker's own threads, before the submission can start any
        note_processes()
        torch_ready = time.perf_counter()
        self.channel.phase("import")
        module = load_submission(self.params["submission"])
        report_processes(self.channel, "import")
        self.channel.send("timing", torch_import_s=torch_ready - began,
                          submission_import_s=time.perf_counter() - torch_ready)
        after_import = identities()
        if changed(self.baseline, after_import):
            self.channel.send("tampering", when="after import", names=changed(self.baseline, after_import))
            self.baseline = after_import
        self.module = module
        executing.start(self.params, self.device)  # armed for every call alike, from here to the end
        if not callable(getattr(module, self.params.get("entry", "ModelNew"), None)):
            self.channel.send("no-model")
            return False
        return True

    def ensure_model(self, trial: dict[str, Any]) -> None:
        import torch

        key = digest_tree(trial["init"])
        if self.model is not None and key == self.init_key:
            return
        self.channel.phase("init")
        torch.manual_seed(trial["init_seed"])
        entry = getattr(self.module, self.params.get("entry", "ModelNew"))  # Model in KernelBench-Hard
        model = entry(*unpack_tree(trial["init"], self.device))
        if isinstance(model, torch.nn.Module):
            model = model.to(self.device).eval()
        self.model, self.init_key = model, key
        self.earlier_outputs = []
        report_processes(self.channel, "init")

    def call(self, label: str, trial: dict[str, Any], inputs: list[Any]) -> Any:
        import torch

        self.channel.phase("call", trial=label)
        params = list(self.model.parameters()) + list(self.model.buffers()) \
            if isinstance(self.model, torch.nn.Module) else []
        census = Census()
        before = input_digests(inputs)
        recorder = Recorder(self.device) if self.params.get("attribute", True) else None
        try:
            began = time.perf_counter()
            with recorder if recorder is not None else contextlib.nullcontext(), executing.executing():
                out = self.model(*inputs)
            wall = time.perf_counter() - began
            if self.device.startswith("cuda") and isinstance(out, torch.Tensor):
                torch.cuda.current_stream().synchronize()
                early = digest(out)
            if recorder is not None:
                recorder.finish_device()
            settle(self.device)
        except Exception as exc:
            if recorder is not None:
                recorder.finish_device()
            self.channel.send("call-error", trial=label, type=type(exc).__name__, message=str(exc)[:2000],
                              traceback=traceback.format_exc()[-4000:])
            return None
        after_counts = Census(census).counts
        after = input_digests(inputs)
        now = identities()
        observation: dict[str, Any] = {
            "trial": label, "describe": _describe(out, self.device),
            "counts_before": census.counts, "counts_after": after_counts,
            "mutated": [i for i, (b, a) in enumerate(zip(before, after)) if b != a],
            "tampered": changed(self.baseline, now),
        }
        self.baseline = now
        tensors = tensors_of(out)
        if tensors:
            ranges = [storage_range(t) for t in tensors]
            observation["aliases"] = sorted(
                {f"input {i}" for i, t in enumerate(inputs) if isinstance(t, torch.Tensor)
                 and any(overlaps(storage_range(t), r) for r in ranges)}
                | {"a parameter or buffer" for p in params if any(overlaps(storage_range(p), r) for r in ranges)}
                | {f"the output of {name}" for name, o in self.earlier_outputs
                   if any(overlaps(storage_range(t), r) for t in tensors_of(o) for r in ranges)
                   # an earlier output that is (a view of) this call's input is the input case
                   and not any(overlaps(storage_range(t), storage_range(i)) for t in tensors_of(o)
                               for i in inputs if isinstance(i, torch.Tensor))})
            observation["output"] = pack_tree(out) if len(tensors) == 1 and isinstance(out, torch.Tensor) \
                else [pack(t) for t in tensors]
            if self.device.startswith("cuda") and isinstance(out, torch.Tensor):
                observation["stream_escape"] = early != digest(out)
        if recorder is not None:
            observation["work"] = recorder.summary(out, wall)
        self.channel.send("call", **observation)
        self.earlier_outputs.append((label, out))
        return out

    def run(self, trial_list: list[dict[str, Any]]) -> None:
        import torch

        trials = {t["name"]: t for t in trial_list}
        nominal = trials.get("nominal")
        if nominal is not None:
            self.ensure_model(nominal)
            inputs_a = unpack_tree(nominal["inputs"], self.device)
            out_a = self.call("nominal", nominal, inputs_a)
            kept = digest(out_a) if isinstance(out_a, torch.Tensor) else None
            second = trials.get("nominal-second")
            if second is not None:
                inputs_b = unpack_tree(second["inputs"], self.device, consume=True)
                out_b = self.call("nominal-second", second, inputs_b)
                if kept is not None and isinstance(out_b, torch.Tensor):
                    self.channel.send("first-output-after-second",
                                      unchanged=digest(out_a) == kept,
                                      shares_storage=overlaps(storage_range(out_a), storage_range(out_b)))
                self.call("repeat", nominal, unpack_tree(nominal["inputs"], self.device, consume=True))
                overwrite = trials.get("nominal-overwrite")
                if overwrite is not None:
                    fresh = unpack_tree(overwrite["inputs"], self.device, consume=True)
                    for old, new in zip(inputs_b, fresh):
                        if isinstance(old, torch.Tensor) and isinstance(new, torch.Tensor) and old.shape == new.shape:
                            old.copy_(new)
                    self.call("nominal-overwrite", overwrite, inputs_b)
        for name, trial in trials.items():
            if name.startswith("nominal"):
                continue
            self.ensure_model(trial)
            self.call(name, trial, unpack_tree(trial["inputs"], self.device, consume=True))


def digest_tree(value: Any) -> str:
    import hashlib
    import json

    def strip(v: Any) -> Any:
        if isinstance(v, dict):
            return {k: (hashlib.sha256(x).hexdigest() if isinstance(x, (bytes, memoryview)) else strip(x)) for k, x in v.items()}
        if isinstance(v, list):
            return [strip(x) for x in v]
        return v

    return hashlib.sha256(json.dumps(strip(value), sort_keys=True, default=str).encode()).hexdigest()


def subject_job(params: dict[str, Any], channel: Any) -> None:
    channel.phase("start")
    subject = Subject(params, channel)
    try:
        _subject_job(subject, params, channel)
    finally:
        try:
            executing.report(channel, params)
        except Exception:  # a closed channel: the parent has judged the run already
            pass


def _subject_job(subject: "Subject", params: dict[str, Any], channel: Any) -> None:
    if not subject.load():
        return
    # The trials come from the reference worker, which ran while this one imported.
    channel.phase("wait-trials")
    import time

    waiting = time.perf_counter()
    fed = channel.receive()
    checks = time.perf_counter()
    subject.device = fed.get("device", subject.device)
    trials = fed.get("trials")
    if not isinstance(trials, list):  # never run on something else than the trials (issue 22)
        channel.send("feed-broken", detail=f"the first message fed carries no trials (keys {sorted(fed)[:6]})")
        return
    if trials:
        subject.run(trials)
        channel.send("timing", waited_for_reference_s=checks - waiting, calls_s=time.perf_counter() - checks)
    # The call schedule (issue 15), fed after the trials: behaviour.schedule_subject.
    schedule = channel.receive()
    if not isinstance(schedule.get("calls"), list):
        channel.send("feed-broken", detail=f"the second message fed carries no schedule (keys {sorted(schedule)[:6]})")
        return
    nominal = next((t for t in trials or [] if t["name"] == "nominal"), None)
    if schedule.get("calls") and nominal is not None:
        from gatekeeper.behaviour.schedule_subject import run_schedule

        began = time.perf_counter()
        subject.ensure_model(nominal)
        run_schedule(subject.model, channel, subject.device, schedule, params.get("attribute", True))
        report_processes(channel, "schedule")
        channel.send("timing", schedule_s=time.perf_counter() - began)
