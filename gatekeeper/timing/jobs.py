"""Sandbox jobs of the timing stage (started and driven by gatekeeper.timing.conduct).

- `reference_job` runs in a worker that never imports the submission: device facts, the
  calibration when the cache lacks it, the counts for the floors, the base input sets (sent
  to the parent, which hands them to the submission's worker), then it times the reference
  in blocks when the parent says so (gatekeeper.timing.blocks).
- `submission_job` runs in a worker that imports the submission and nothing of the problem:
  its set-up is the checking worker's own (`gatekeeper.behaviour.subject_job.Subject.load`,
  the same harness modules, no reference `Model`, no problem module; the checking worker's
  decoy `gk_problem` as in its schedule's timed part), then it times the
  submission in blocks, alternating with the reference's worker, and reports observations
  only (times, sampled outputs); the parent compares them with the reference's.

`gatekeeper.timing.method` is imported at the top, before any submission code, so the
timing primitives it captures are the real ones.
"""

from __future__ import annotations

import sys
import types
from typing import Any

from gatekeeper.timing import method  # noqa: F401  (captures CUDA primitives first)

import torch  # noqa: E402


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


def _bases(problem: types.ModuleType, key: int, params: dict[str, Any], device: torch.device) -> list[list[Any]]:
    """Distinct base sets within the device budget and the shipping budget (each set travels
    once to the submission's worker)."""
    from gatekeeper.timing.fresh import set_bytes, set_count

    wanted = int(params["input_sets"])
    first = input_sets(problem, key, 1, 1 << 62, device)[0]
    per = set_bytes(first)
    count = set_count(per, int(params["cap_bytes"]), wanted)
    count = max(1, min(count, int(params.get("ship_bytes", 512 << 20)) // max(per, 1)))
    sets = [first]
    for k in range(1, count):
        torch.manual_seed(_set_seed(key, k))
        sets.append(list(_to_device(list(problem.get_inputs()), device)))
    return sets


def reference_job(params: dict[str, Any], channel: Any) -> None:
    from gatekeeper.sandbox.tensors import pack_tree
    from gatekeeper.timing.blocks import BlockTimer, serve
    from gatekeeper.timing.fresh import FreshInputs

    channel.phase("import")
    cuda = params.get("device", "cuda") == "cuda"
    device = torch.device("cuda", torch.cuda.current_device()) if cuda else torch.device("cpu")
    facts: dict[str, Any] = {}
    if cuda:
        facts = _device_facts()
        channel.send("device", facts=facts)
    if params.get("calibrate") and cuda:
        channel.phase("calibrate")
        from gatekeeper.timing.calibrate import measure

        channel.send("calibration", values=measure(facts.get("L2_cache_size") or 50 << 20))
    problem = load_problem(params["problem"], params.get("jitter_names", []))
    channel.phase("count")
    model_seed, inputs_key = run_seeds(params)
    sets = _bases(problem, inputs_key, params, device)
    model = make_model(problem.Model, problem, model_seed, device)
    from gatekeeper.timing.floors import count

    counts = count(model, sets[0], None)
    channel.send("counts", **counts.as_dict())
    channel.phase("inputs")
    init = list(problem.get_init_inputs()) if hasattr(problem, "get_init_inputs") else []
    fresh_key = _set_seed(inputs_key, -1)
    channel.send("inputs", init=pack_tree(init), init_seed=model_seed, key=fresh_key,
                 sets=[pack_tree(s) for s in sets])
    if cuda:  # the submission's worker ran the attribution warm-up (CUPTI) in its set-up: so does this one
        try:
            from gatekeeper.behaviour.attribution import warm_up

            warm_up("cuda")
        except ImportError:
            pass
    timer = BlockTimer(model, FreshInputs(sets, fresh_key), device, float(params["flush_factor"]))
    channel.phase("idle")
    serve(timer, channel)


def submission_job(params: dict[str, Any], channel: Any) -> None:
    """Set up exactly as the checking worker does (Subject.load), then time blocks."""
    from gatekeeper.behaviour.subject_job import Subject
    from gatekeeper.sandbox.tensors import unpack_tree
    from gatekeeper.timing.blocks import BlockTimer, serve
    from gatekeeper.timing.fresh import FreshInputs

    channel.phase("start")
    subject = Subject(params, channel)
    if not subject.load():
        return
    channel.phase("wait-inputs")
    fed = channel.receive()
    device = torch.device(subject.device if subject.device != "cuda" else f"cuda:{torch.cuda.current_device()}")
    sets = [list(unpack_tree(s, str(device))) for s in fed["sets"]]
    subject.ensure_model({"init": fed["init"], "init_seed": int(fed["init_seed"])})
    # The checking worker plants this decoy (a `gk_problem` module with a `Model` that is not
    # the reference) before the timed part of its call schedule, and turns the poison off;
    # every timed call here sees what the scheduled calls there saw.
    from gatekeeper.behaviour.schedule_subject import plant_decoy

    plant_decoy()
    timer = BlockTimer(subject.model, FreshInputs(sets, int(fed["key"])), device, float(fed["flush_factor"]))
    del fed
    channel.send("ready", input_sets=len(sets))
    channel.phase("idle")
    serve(timer, channel)
