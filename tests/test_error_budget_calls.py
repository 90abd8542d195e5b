"""The error budget on the scheduled calls (GK668) tells a lower precision from a decision
that rounding or a tie tipped: the first is in the arithmetic of most calls, or of every call
from some point on; the second is a call here and there (H100, 2026-12-07: an honest top-p
filter had 1 of 8 calls at 15,505x the honest error, the cutoff token kept where the
reference dropped it). Real torch, the judge as the behaviour stage runs it."""

from __future__ import annotations

import torch

from gatekeeper.behaviour.schedule_judge import ScheduleJudge
from gatekeeper.sandbox.tensors import pack

CALLS = 12


def _values(index: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(index)
    return torch.randn(64, 64, generator=g, dtype=torch.float64)


def _found(low: set[int], tipped: set[int] = frozenset()) -> list[str]:
    calls = [{"index": i, "kind": "fresh", "dist": "normal", "base": None,
              "output": pack(_values(i).float()), "output64": pack(_values(i))} for i in range(CALLS)]
    judge = ScheduleJudge({"calls": calls, "timed_from": 4}, lambda dtype: (1e-2, 1e-2), max_error_ratio=100.0)
    for i in range(CALLS):
        out = _values(i).float()
        if i in low:  # bf16-rounded: within the 1e-2 tolerance, far from float32's error
            out = out.bfloat16().float()
        if i in tipped:  # one element off by 5e-3: a cutoff decided the other way
            out[7, 7] += 5e-3
        judge.observe({"kind": "schedule-call", "index": i, "output": pack(out)})
    found: list[str] = []
    judge.judge(lambda code, trial, evidence, **fields: found.append(code))
    return found


def test_an_honest_float32_run_is_within_the_budget():
    assert _found(set()) == []


def test_a_call_here_and_there_over_the_budget_is_a_tipped_decision_not_a_precision():
    assert _found(set(), tipped={1}) == []
    assert _found(set(), tipped={2, 9}) == []  # two apart, calls within the budget between them


def test_a_lower_precision_on_most_calls_or_from_some_call_on_is_still_found():
    assert _found(set(range(CALLS))) == ["GK668"]
    assert _found(set(range(0, CALLS, 2))) == ["GK668"]  # every other call: half of them
    assert _found(set(range(8, CALLS))) == ["GK668"]  # exact for eight calls, then bf16 (the timed ones)
    assert _found(set(range(10, CALLS))) == ["GK668"]  # the last two
    assert _found({CALLS - 1}) == []  # one call alone is no pattern
