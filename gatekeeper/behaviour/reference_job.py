"""The reference worker: loads the problem (never the submission), draws each trial's
inputs and computes the reference outputs. Runs as a sandbox job."""

from __future__ import annotations

import traceback
from typing import Any, Optional

from gatekeeper.behaviour.observe import input_digests, overlaps, settle, storage_range, tensors_of
from gatekeeper.problem.jitter import Jitter, JitterSpec
from gatekeeper.problem.shims import install_shims
from gatekeeper.behaviour.transfer_budget import DISK_RESERVE, disk_shortfall  # noqa: F401 - re-exported
from gatekeeper.sandbox.loading import load_module
from gatekeeper.sandbox.tensors import digest, pack_tree


def _to(value: Any, device: str) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, list):
        return [_to(v, device) for v in value]
    if isinstance(value, tuple):
        return tuple(_to(v, device) for v in value)
    return value


def _describe_output(out: Any) -> dict[str, Any]:
    import torch

    if isinstance(out, torch.Tensor):
        flat = out.detach().float().reshape(-1) if out.is_floating_point() else out.detach().reshape(-1)
        # A differing value among the first few thousand settles it without a pass over the
        # whole output (a 512 MiB one takes seconds); only a constant-looking head scans it all.
        constant = bool(flat.numel() > 1 and (flat[:4096] == flat[0]).all().item()
                        and (flat == flat[0]).all().item())
        # All zeros is a constant output whose first value is zero (one pass, not two: issue 21 item 12).
        zeros = bool(flat.numel() > 0 and (constant or flat.numel() == 1) and (flat[0] == 0).item())
        return {"kind": "tensor", "constant": constant, "zeros": zeros}
    if isinstance(out, (tuple, list)) and all(isinstance(t, torch.Tensor) for t in out):
        return {"kind": "sequence", "length": len(out), "constant": False, "zeros": False}
    return {"kind": type(out).__name__, "constant": False, "zeros": False}


# A problem whose nominal inputs pass this many transfer thresholds (1 GiB by default) is
# jittered down only: every trial's tensors are held as transfer files until the submission
# has run (sandbox.spill), and a 2x jitter of each dimension of a multi-GiB problem would
# need several times the nominal disk and memory.
LARGE_PROBLEM_THRESHOLDS = 16


def large_problem_bytes() -> int:
    from gatekeeper.sandbox.spill import threshold

    return LARGE_PROBLEM_THRESHOLDS * threshold()


def _nbytes(values: list[Any]) -> int:
    import torch

    return sum(v.numel() * v.element_size() for v in values if isinstance(v, torch.Tensor))




def run_attempt(problem_path: str, attempt: dict[str, Any], trial: dict[str, Any], names: list[str],
                device: str, index: int, max_bytes: Optional[int] = None) -> dict[str, Any]:
    import torch

    spec = JitterSpec.from_json(attempt["spec"])
    jitter = Jitter(spec)
    module = load_module(problem_path, f"gk_problem_{index}", attempt["source"], {n: jitter for n in names})
    torch.manual_seed(trial["init_seed"])
    init = list(module.get_init_inputs())
    model = module.Model(*init)
    if isinstance(model, torch.nn.Module):
        model = model.to(device).eval()
    torch.manual_seed(trial["value_seed"])
    inputs = _to(list(module.get_inputs()), device)
    if max_bytes is not None and _nbytes(inputs) > max_bytes:
        raise ValueError(f"jittered inputs of {_nbytes(inputs)} bytes exceed the nominal {max_bytes}: a problem "
                         f"over {large_problem_bytes() >> 20} MiB is jittered down only")
    packed_inputs = pack_tree(inputs)
    # A transfer file's digest is the sha256 of its tensor's bytes, just taken: not hashed twice.
    before = [p["file"]["sha256"] if isinstance(p, dict) and isinstance(p.get("file"), dict) else d
              for p, d in zip(packed_inputs, _digests_unless_spilled(inputs, packed_inputs))]
    with torch.no_grad():
        out = model(*inputs)
    settle(device)
    held = _nbytes(inputs) + _nbytes(list(tensors_of(out)))
    if max_bytes is not None and held > max_bytes:
        raise ValueError(f"jittered inputs and output of {held} bytes exceed the nominal {max_bytes}: a problem "
                         f"over {large_problem_bytes() >> 20} MiB is jittered down only")
    after = input_digests(inputs)
    out_ranges = [storage_range(t) for t in tensors_of(out)]
    aliased = [i for i, t in enumerate(inputs) if isinstance(t, torch.Tensor)
               and any(overlaps(storage_range(t), r) for r in out_ranges)]
    params = [p for p in (model.parameters() if isinstance(model, torch.nn.Module) else [])]
    aliases_param = any(overlaps(storage_range(p), r) for p in params for r in out_ranges)
    extra = wider_reference(model, inputs, out, device) if trial.get("name") in WIDER_TRIALS else {}
    return {
        **extra,
        "init": pack_tree(init),
        "inputs": packed_inputs,
        "output": pack_tree(out),
        "output_info": _describe_output(out),
        "shapes": [list(t.shape) if isinstance(t, torch.Tensor) else None for t in inputs],
        "mutated": [i for i, (b, a) in enumerate(zip(before, after)) if b != a],
        "aliased_inputs": aliased,
        "aliases_parameter": aliases_param,
        "jitter_calls": jitter.calls,
        "input_bytes": _nbytes(inputs),
        "held_bytes": held,
        "constants": attempt["constants"],
        "spec": attempt["spec"],
    }


def _digests_unless_spilled(inputs: list[Any], packed: list[Any]) -> list[Optional[str]]:
    """observe.input_digests, skipping the inputs that went out as transfer files."""
    import torch

    return [None if isinstance(p, dict) and isinstance(p.get("file"), dict) else
            (digest(t) if isinstance(t, torch.Tensor) else None) for t, p in zip(inputs, packed)]


# The error budget and the op list come from these trials only (a float64 forward is not free).
WIDER_TRIALS = ("nominal", "nominal-second")


def wider_reference(model: Any, inputs: list[Any], out: Any, device: str) -> dict[str, Any]:
    """The reference once more in float64 (the error budget), recording which ATen compute
    operators it dispatches (the strict profile's 'torch computes what the reference computes')."""
    import torch

    from gatekeeper.behaviour.attribution import op_names
    from gatekeeper.behaviour.wide_mode import widened

    if not (isinstance(out, torch.Tensor) and out.is_floating_point()):
        return {}
    if out.numel() > 1 << 26:  # said in the report (GK669), never skipped silently
        return {"wide_skipped": f"the output has {out.numel():,} values, over the 2^26 a float64 reference "
                                f"is computed for"}
    try:
        wide = model.double() if isinstance(model, torch.nn.Module) else model
        wide_inputs = [t.double() if isinstance(t, torch.Tensor) and t.is_floating_point() else t for t in inputs]
        with torch.no_grad(), op_names() as names, widened():
            out64 = wide(*wide_inputs)
        settle(device)
        if not isinstance(out64, torch.Tensor) or list(out64.shape) != list(out.shape):
            return {"wide_skipped": "the reference in float64 returned something other than a tensor of the "
                                    "output's shape"}
        return {"output64": pack_tree(out64.double()), "compute_ops": sorted(names)}
    except Exception as exc:  # an op without float64 support: no error budget for this problem
        return {"wide_skipped": f"the reference does not run in float64 ({type(exc).__name__}: {str(exc)[:160]})"}


def reference_job(params: dict[str, Any], channel: Any) -> None:
    channel.phase("load")
    install_shims()
    import torch

    device = params.get("device") or ("cuda" if torch.cuda.is_available() else "cpu")
    channel.send("env", torch=torch.__version__, cuda=torch.cuda.is_available(), device=device,
                 gpu=torch.cuda.get_device_name(0) if device == "cuda" else None)
    names = params["jitter_names"]
    nominal_source = None
    max_bytes: Optional[int] = None  # set once the nominal inputs are known to be large
    nominal_constants: dict[str, int] = {}
    for index, trial in enumerate(params["trials"]):
        channel.phase("trial")
        failures = []
        for number, attempt in enumerate(trial["attempts"]):
            grown = sorted(k for k, v in (attempt.get("constants") or {}).items()
                           if max_bytes is not None and isinstance(v, int) and v > nominal_constants.get(k, v))
            if grown and not trial["name"].startswith("nominal"):  # known too large before drawing a value
                failures.append({"spec": attempt["spec"], "constants": attempt["constants"],
                                 "error": f"grows {', '.join(grown)} beyond nominal: a problem over "
                                          f"{large_problem_bytes() >> 20} MiB is jittered down only"})
                continue
            try:
                result = run_attempt(params["problem"], attempt, trial, names, device, index * 100 + number,
                                     None if trial["name"].startswith("nominal") else max_bytes)
            except Exception as exc:
                failures.append({"spec": attempt["spec"], "constants": attempt["constants"],
                                 "error": f"{type(exc).__name__}: {exc}"[:500],
                                 "traceback": traceback.format_exc()[-3000:]})
                continue
            short = disk_shortfall(result["held_bytes"])
            if short is not None:  # skipped and said, never a half-written transfer file
                failures.append({"spec": attempt["spec"], "constants": attempt["constants"], "error": short})
                continue
            channel.send("trial", name=trial["name"], attempt=number, failures=failures, **result)
            if trial["name"] == "nominal":
                nominal_source = attempt["source"]
                max_bytes = result["held_bytes"] if result["held_bytes"] > large_problem_bytes() else None
                nominal_constants = {k: v for k, v in (attempt.get("constants") or {}).items() if isinstance(v, int)}
            break
        else:
            channel.send("trial-failed", name=trial["name"], failures=failures)
    schedule = params.get("schedule")
    if schedule and nominal_source is not None:
        channel.phase("schedule")
        from gatekeeper.behaviour.schedule_ref import schedule_calls

        try:
            channel.send("schedule", **schedule_calls(params["problem"], nominal_source, schedule["init_seed"],
                                                      names, device, schedule["plan"], schedule["fixed"],
                                                      tick=lambda i: channel.phase("schedule", call=i)))
        except Exception as exc:  # the reference rejects a value distribution: say so, check the rest
            channel.send("schedule-failed", error=f"{type(exc).__name__}: {exc}"[:500],
                         traceback=traceback.format_exc()[-3000:])
