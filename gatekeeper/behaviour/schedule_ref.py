"""The call schedule, reference side (runs in the reference worker, never with the submission).

Generates every scheduled call's inputs from the run's secret (problem.schedule), computes
the reference output of each, trims the schedule to the byte and time budgets, and returns
it packed for the parent, which forwards the inputs to the submission's worker.
"""

from __future__ import annotations

import time
from typing import Any

from gatekeeper.problem.jitter import Jitter, JitterSpec
from gatekeeper.problem.schedule import Schedule, budgeted_count
from gatekeeper.problem.values import apply_distribution, near_duplicate
from gatekeeper.sandbox.loading import load_module
from gatekeeper.sandbox.tensors import pack_tree

HUGE = 1 << 30  # "as many as the budget allows", for the size test


def _nbytes(value: Any) -> int:
    import torch

    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size()
    if isinstance(value, (list, tuple)):
        return sum(_nbytes(v) for v in value)
    return 0


def _to(value: Any, device: str) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, (list, tuple)):
        return type(value)(_to(v, device) for v in value)
    return value


def schedule_calls(problem_path: str, source: str, init_seed: int, names: list[str], device: str,
                   plan: dict[str, Any], fixed: list[int]) -> dict[str, Any]:
    """{"calls": [{index, kind, dist, base, inputs, output}], "timed_from", "planned"}."""
    import torch

    schedule = Schedule.from_json(plan)
    module = load_module(problem_path, "gk_problem_schedule", source, {n: Jitter(JitterSpec()) for n in names})
    torch.manual_seed(init_seed)
    model = module.Model(*list(module.get_init_inputs()))
    if isinstance(model, torch.nn.Module):
        model = model.to(device).eval()
    kept: dict[int, list[Any]] = {}  # recent steps' inputs, for near-duplicates
    calls: list[dict[str, Any]] = []
    skipped: list[str] = []
    count, began = len(schedule.steps), time.perf_counter()
    for step in schedule.steps:
        if step.index >= count:
            break
        try:
            inputs, out = _one(module, model, step, kept, device, fixed)
        except Exception as exc:  # the problem rejects these values (a domain): skip the call
            skipped.append(f"call {step.index} ({step.kind}, {step.dist}): {type(exc).__name__}: {exc}"[:300])
            continue
        if inputs is None:
            break
        calls.append({"index": step.index, "kind": step.kind, "dist": step.dist, "base": step.base,
                      "inputs": pack_tree(inputs), "output": pack_tree(out)})
        if step.index in (0, 3):  # the budget, from the first calls' size and time
            per_call = (time.perf_counter() - began) / (step.index + 1)
            count = budgeted_count(len(schedule.steps), _nbytes(inputs) + _nbytes(out), per_call)
    trimmed = schedule.trimmed(len(calls))
    return {"calls": calls, "timed_from": trimmed.timed_from, "planned": len(schedule.steps), "skipped": skipped[:20]}


def _one(module: Any, model: Any, step: Any, kept: dict[int, list[Any]], device: str,
         fixed: list[int]) -> tuple[Any, Any]:
    """One call's inputs and reference output; (None, None) when the problem is too large."""
    import torch

    if step.base is not None and step.base in kept:
        inputs = near_duplicate(kept[step.base], step.kind == "near-sparse", step.seed, fixed)
    else:
        torch.manual_seed(step.seed)
        inputs = apply_distribution(list(module.get_inputs()), step.dist, step.seed ^ 0x7A1, fixed)
    inputs = _to(inputs, device)
    if step.index == 0 and budgeted_count(HUGE, 2 * _nbytes(inputs), 0.0) == 0:
        return None, None  # too large to send hundreds of times: the timing stage's fresh inputs cover it
    kept[step.index] = inputs
    kept.pop(step.index - 17, None)
    with torch.no_grad():
        out = model(*[i.clone() if isinstance(i, torch.Tensor) else i for i in inputs])
    return inputs, out
