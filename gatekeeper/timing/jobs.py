"""Sandbox jobs of the timing stage (run by gatekeeper.sandbox.run_job, on the GPU).

- `time_pair_job` runs in a worker that imports the submission: it times the submission and
  the reference interleaved and reports observations only (times, sampled outputs).
- `reference_job` runs in a worker that never imports the submission: device facts, the
  calibration when the cache lacks it, the counts for the floors, the reference timed
  alone, and the reference's outputs on the same input sets, for the parent to compare.

`gatekeeper.timing.method` is imported at the top, before any submission code, so the
timing primitives it captures are the real ones.
"""

from __future__ import annotations

import sys
import types
from typing import Any

from gatekeeper.timing import method  # noqa: F401  (captures CUDA primitives first)

import torch  # noqa: E402

from gatekeeper.timing.adaptive import StopRule  # noqa: E402


class _NominalJitter:
    """Stand-in for the harness jitter object at nominal sizes: timing uses the nominal
    problem, the behaviour stage has already tried the jittered ones."""

    def jitter_int(self, value: int, align: int = 1, *_: Any, **__: Any) -> int:
        return value

    jitter = jitter_int


def _install_shims() -> None:
    """The harness modules problems import (kernelbench.distributed_collectives, ...)."""
    try:
        from gatekeeper.problem.shims import install_shims
    except Exception:  # an installation without the problem package: the seed's one shim
        install_shims = None
    if install_shims is not None:
        install_shims()
        return
    if "kernelbench.distributed_collectives" in sys.modules:
        return
    pkg = types.ModuleType("kernelbench")
    pkg.__path__ = []  # type: ignore[attr-defined]
    mod = types.ModuleType("kernelbench.distributed_collectives")
    mod.default_device = lambda: "cuda"  # type: ignore[attr-defined]
    pkg.distributed_collectives = mod  # type: ignore[attr-defined]
    sys.modules.setdefault("kernelbench", pkg)
    sys.modules["kernelbench.distributed_collectives"] = mod


def load_problem(path: str, jitter_names: list[str]) -> types.ModuleType:
    """The problem module at nominal sizes (the behaviour stage has tried jittered ones)."""
    from gatekeeper.sandbox.loading import load_module

    _install_shims()
    jitter = _NominalJitter()
    return load_module(path, "gk_problem", inject={name: jitter for name in jitter_names})


def _to_device(value: Any, device: torch.device) -> Any:
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, (list, tuple)):
        return type(value)(_to_device(v, device) for v in value)
    return value


def run_seeds(params: dict[str, Any]) -> tuple[int, int]:
    """(model seed, inputs key), derived one way from the run seed, which is then dropped from
    the params: the submission's process holds only the model seed (what torch.initial_seed()
    shows it), from which neither the run seed nor the inputs' seeds can be recovered
    (gatekeeper.problem.secret), so it cannot regenerate the timed inputs ahead of time."""
    seed = int(params.pop("seed"))
    try:
        from gatekeeper.problem.secret import derive, init_seed
    except ImportError:  # an installation without the problem package
        import hashlib

        master = hashlib.pbkdf2_hmac("sha256", str(seed).encode(), b"gatekeeper-run-secret", 20_000)

        def derive(_: int, tag: str) -> int:
            return int.from_bytes(hashlib.sha256(master + tag.encode()).digest()[:4], "big") & 0x7FFFFFFF

        def init_seed(_: int) -> int:
            return derive(_, "init")
    return init_seed(seed), derive(seed, "timing-inputs")


def _set_seed(key: int, k: int) -> int:
    import hashlib

    return int.from_bytes(hashlib.sha256(f"{key}:{k}".encode()).digest()[:4], "big") & 0x7FFFFFFF


def input_sets(problem: types.ModuleType, seed: int, count: int, cap_bytes: int, device: torch.device) -> list[list[Any]]:
    """Pre-generated inputs, one seed each (from the inputs key), so both workers draw the same values."""
    from gatekeeper.timing.floors import unique_bytes

    sets: list[list[Any]] = []
    for k in range(count):
        torch.manual_seed(_set_seed(seed, k))
        sets.append(list(_to_device(list(problem.get_inputs()), device)))
        if k == 0 and count > 2:
            per = max(unique_bytes(sets[0]), 1)
            count = max(2, min(count, cap_bytes // per))
    return sets


def make_model(cls: Any, problem: types.ModuleType, seed: int, device: torch.device) -> Any:
    torch.manual_seed(seed)  # same seed for Model and ModelNew: same weights, as harnesses do
    init = list(problem.get_init_inputs()) if hasattr(problem, "get_init_inputs") else []
    return cls(*init).to(device).eval()


def gather(out: Any, seed: int, per_tensor: int) -> list[dict[str, Any]]:
    """A fixed random sample of each output tensor's elements, packed for the channel."""
    from gatekeeper.sandbox.tensors import pack

    tensors = [out] if isinstance(out, torch.Tensor) else [t for t in (out or []) if isinstance(t, torch.Tensor)]
    packed = []
    for i, t in enumerate(tensors):
        flat = t.detach().reshape(-1)
        n = flat.numel()
        g = torch.Generator().manual_seed(seed + i)
        idx = torch.randint(0, max(n, 1), (min(per_tensor, n),), generator=g).to(flat.device)
        packed.append({"shape": list(t.shape), "dtype": str(t.dtype).replace("torch.", ""),
                       "values": pack(flat[idx] if n else flat)})
    return packed


def _rule(p: dict[str, Any]) -> StopRule:
    return StopRule(**p["rule"])


def _device_facts() -> dict[str, Any]:
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    facts = {"name": props.name, "torch": torch.__version__, "cuda": torch.version.cuda,
             "driver": _driver_version()}
    for attr in ("L2_cache_size", "multi_processor_count", "total_memory", "memory_clock_rate",
                 "memory_bus_width", "clock_rate", "major", "minor"):
        value = getattr(props, attr, None)
        if value is not None:
            facts[attr] = int(value)
    return facts


def _driver_version() -> str:
    try:
        with open("/proc/driver/nvidia/version") as handle:
            for word in handle.read().split():
                if word.count(".") >= 1 and word.replace(".", "").isdigit():
                    return word
    except OSError:
        pass
    return "unknown"


def reference_job(params: dict[str, Any], channel: Any) -> None:
    channel.phase("import")
    device = torch.device("cuda", torch.cuda.current_device())
    facts = _device_facts()
    channel.send("device", facts=facts)
    if params.get("calibrate"):
        channel.phase("calibrate")
        from gatekeeper.timing.calibrate import measure

        channel.send("calibration", values=measure(facts.get("L2_cache_size") or 50 << 20))
    problem = load_problem(params["problem"], params.get("jitter_names", []))
    channel.phase("count")
    model_seed, inputs_key = run_seeds(params)
    sets = input_sets(problem, inputs_key, int(params["input_sets"]), int(params["cap_bytes"]), device)
    model = make_model(problem.Model, problem, model_seed, device)
    from gatekeeper.timing.floors import count

    counts = count(model, sets[0], None)
    channel.send("counts", **counts.as_dict())
    channel.phase("outputs")
    with torch.no_grad():
        for k in sorted({int(i) % len(sets) for i in params.get("keep", [])}):
            channel.send("output", set=k, tensors=gather(model(*sets[k]), int(params["gather_seed"]),
                                                         int(params["gather_elements"])))
    channel.phase("time")
    ref = method.Side("reference", model, sets)
    result = method.time_pair(ref, None, rule=_rule(params), warmup_calls=int(params["warmup_calls"]),
                              l2_bytes=facts.get("L2_cache_size") or 50 << 20,
                              flush_factor=float(params["flush_factor"]), mode="events")
    channel.send("reference_alone", event_us=result.sampled.reference_us, stopped_by=result.sampled.stopped_by)


def time_pair_job(params: dict[str, Any], channel: Any) -> None:
    channel.phase("import")
    device = torch.device("cuda", torch.cuda.current_device())
    model_seed, inputs_key = run_seeds(params)  # before any submission code runs
    problem = load_problem(params["problem"], params.get("jitter_names", []))
    # The inputs are drawn before the submission's code runs, and their key is dropped.
    sets = input_sets(problem, inputs_key, int(params["input_sets"]), int(params["cap_bytes"]), device)
    del inputs_key
    from gatekeeper.sandbox.loading import load_module

    submission = load_module(params["submission"], "gk_submission")
    channel.phase("setup")
    ref = method.Side("reference", make_model(problem.Model, problem, model_seed, device), sets)
    sub = method.Side("submission", make_model(getattr(submission, params.get("entry", "ModelNew")), problem, model_seed, device),
                      [list(s) for s in sets])
    channel.phase("time")
    mode = params.get("mode", "events")
    kwargs = dict(rule=_rule(params), warmup_calls=int(params["warmup_calls"]),
                  l2_bytes=torch.cuda.get_device_properties(device).L2_cache_size or 50 << 20,
                  flush_factor=float(params["flush_factor"]), keep=[int(i) for i in params.get("keep", [])])
    graph_error = None
    try:
        result = method.time_pair(ref, sub, mode=mode, **kwargs)
    except Exception as exc:  # graph capture refused: time plain launches, say so
        if mode != "graph":
            raise
        graph_error = f"{type(exc).__name__}: {exc}"[:500]
        ref = method.Side("reference", ref.call, sets)
        sub = method.Side("submission", sub.call, sub.input_sets)
        result = method.time_pair(ref, sub, mode="events", **kwargs)
    channel.phase("report")
    channel.send("pairs", reference_event_us=ref.event_us, submission_event_us=sub.event_us,
                 reference_synced_us=ref.synced_us, submission_synced_us=sub.synced_us,
                 mode=result.mode, stopped_by=result.sampled.stopped_by, elapsed_s=result.sampled.elapsed_s,
                 flush_bytes=result.flush_bytes, spin_us=result.spin_us, host_call_us=result.host_call_us,
                 input_sets=len(sets), graph_error=graph_error)
    for index, out in sorted(sub.kept.items()):
        channel.send("output", index=index, set=index % len(sets),
                     tensors=gather(out, int(params["gather_seed"]), int(params["gather_elements"])))
