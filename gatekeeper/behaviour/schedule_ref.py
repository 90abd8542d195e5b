"""The call schedule, reference side (runs in the reference worker, never with the submission).

Generates every scheduled call's inputs from the run's secret (problem.schedule), computes
the reference output of each, trims the schedule to the byte and time budgets, and returns
it packed for the parent, which forwards the inputs to the submission's worker.
"""

from __future__ import annotations

import time
from typing import Any, Callable

from gatekeeper.problem.jitter import Jitter, JitterSpec
from gatekeeper.problem.schedule import BUDGET_BYTES, Schedule, budgeted_count, plain_tail
from gatekeeper.problem.values import apply_distribution, near_duplicate
from gatekeeper.sandbox.loading import load_module
from gatekeeper.sandbox.tensors import pack_tree

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


# A float64 reference output (the fair value judgment, behaviour.compare.fair_compare) is
# computed for outputs up to this many elements (512 MiB in float64 per call).
WIDE_LIMIT = 1 << 26


def schedule_calls(problem_path: str, source: str, init_seed: int, names: list[str], device: str,
                   plan: dict[str, Any], fixed: list[int], tick: Callable[[int], None] = lambda _: None
                   ) -> dict[str, Any]:
    """{"calls": [{index, kind, dist, base, inputs, output, output64?}], "timed_from", "planned",
    "skipped"}. Runs at every problem size (issue 22): large problems get fewer calls
    (problem.schedule.MIN_LARGE_CALLS), and a call whose transfer files the disk cannot hold
    stops the schedule with the reason in "skipped", never silently."""
    import torch

    from gatekeeper.behaviour.transfer_budget import disk_shortfall

    schedule = Schedule.from_json(plan)
    module = load_module(problem_path, "gk_problem_schedule", source, {n: Jitter(JitterSpec()) for n in names})
    torch.manual_seed(init_seed)
    model = module.Model(*list(module.get_init_inputs()))
    if isinstance(model, torch.nn.Module):
        model = model.to(device).eval()
    wide = _Wide(model)
    kept: dict[int, list[Any]] = {}  # recent steps' inputs, for near-duplicates
    calls: list[dict[str, Any]] = []
    skipped: list[str] = []
    count, began, held = len(schedule.steps), time.perf_counter(), 0
    steps = {s.index: s for s in schedule.steps}
    for step in schedule.steps:
        if step.index >= count:
            break
        tick(step.index)
        try:
            inputs, out = _one(module, model, step, kept, device, fixed, steps)
        except Exception as exc:  # the problem rejects these values (a domain): skip the call
            skipped.append(f"call {step.index} ({step.kind}, {step.dist}): {type(exc).__name__}: {exc}"[:300])
            continue
        size = _nbytes(inputs) + _nbytes(out)
        short = disk_shortfall(held + size)
        if short is not None:
            skipped.append(f"stopped before call {step.index} of {count}: {short}"[:300])
            break
        held += size
        if size > BUDGET_BYTES:  # only the steps a near-duplicate can still copy stay in memory
            for old in [i for i in kept if i < step.index - 2]:
                kept.pop(old)
        call = {"index": step.index, "kind": step.kind, "dist": step.dist, "base": step.base,
                "inputs": pack_tree(inputs), "output": pack_tree(out)}
        out64 = wide(inputs, out)
        if out64 is not None:
            call["output64"] = pack_tree(out64)
        calls.append(call)
        if step.index in (0, 3):  # the budget, from the first calls' size and time
            per_call = (time.perf_counter() - began) / (step.index + 1)
            count = budgeted_count(len(schedule.steps), size, per_call)
            plain_tail(schedule.steps[:count])  # the calls after the timing loop: the budgeted schedule's last
    trimmed = schedule.trimmed(len(calls))
    return {"calls": calls, "timed_from": trimmed.timed_from, "planned": len(schedule.steps), "skipped": skipped[:20]}


class _Wide:
    """The reference once more in float64 for one call (None where it does not apply: a
    non-float or very large output, or an op without float64 support)."""

    def __init__(self, model: Any) -> None:
        self.model, self.wide, self.broken = model, None, False

    def __call__(self, inputs: list[Any], out: Any) -> Any:
        import copy

        import torch

        from gatekeeper.behaviour.wide_mode import widened

        if self.broken or not (isinstance(out, torch.Tensor) and out.is_floating_point()
                               and out.numel() <= WIDE_LIMIT):
            return None
        try:
            if self.wide is None:
                self.wide = copy.deepcopy(self.model).double() if isinstance(self.model, torch.nn.Module) \
                    else self.model
            wide_inputs = [t.double() if isinstance(t, torch.Tensor) and t.is_floating_point() else t for t in inputs]
            with torch.no_grad(), widened():  # also where the forward casts to float32 itself
                out64 = self.wide(*wide_inputs)
        except Exception:
            self.broken = True
            return None
        if not isinstance(out64, torch.Tensor) or list(out64.shape) != list(out.shape):
            return None
        return out64.double()


def _one(module: Any, model: Any, step: Any, kept: dict[int, list[Any]], device: str,
         fixed: list[int], steps: dict[int, Any]) -> tuple[Any, Any]:
    """One call's inputs and reference output."""
    import torch

    base = steps.get(step.base) if step.base is not None else None
    if step.kind in ("repeat", "again") and step.base in kept:
        inputs = [i.clone() if isinstance(i, torch.Tensor) else i for i in kept[step.base]]
    elif step.kind == "repeat" and base is not None and base.kind == "fresh":
        # A large problem keeps only the last calls' inputs: the fresh base's contents are drawn
        # again from its own seed, exactly (the same generator state, the same distribution).
        inputs = _fresh(module, base, fixed)
    elif step.base is not None and step.base in kept:
        inputs = near_duplicate(kept[step.base], step.kind == "near-sparse", step.seed, fixed)
    else:
        inputs = _fresh(module, step, fixed)
    inputs = _to(inputs, device)
    kept[step.index] = inputs
    kept.pop(step.index - 17, None)
    with torch.no_grad():
        out = model(*[i.clone() if isinstance(i, torch.Tensor) else i for i in inputs])
    return inputs, out


def _fresh(module: Any, step: Any, fixed: list[int]) -> list[Any]:
    import torch

    torch.manual_seed(step.seed)
    return apply_distribution(list(module.get_inputs()), step.dist, step.seed ^ 0x7A1, fixed)
