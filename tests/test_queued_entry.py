"""Checked calls that start behind work queued on the current stream (behaviour.queued_entry,
GK641): drawn from the run's secret among plain fresh calls, made only on a GPU, and a wrong
answer on them alone names work that is not ordered after the caller's stream (red team
round 8: a side stream hidden under the timing's spin, a branch on a busy stream)."""

from __future__ import annotations

import torch

from gatekeeper.behaviour.queued_entry import queue_behind_work
from gatekeeper.behaviour.schedule_checks import MIN_QUEUED, queued_indices
from gatekeeper.behaviour.schedule_judge import ScheduleJudge
from gatekeeper.sandbox.tensors import pack


def _calls(n: int = 24) -> list[dict]:
    calls = [{"index": i, "kind": "fresh", "dist": "normal"} for i in range(n)]
    calls[3].update(kind="repeat")
    calls[5].update(dist="sparse")
    return calls


def test_queued_calls_are_plain_fresh_calls_drawn_from_the_secret():
    calls = _calls()
    one, same, other = queued_indices(7, calls), queued_indices(7, calls), queued_indices(8, calls)
    assert one == same and one != other
    assert not one & {3, 5}  # a repeat and a value distribution keep their own purpose
    assert MIN_QUEUED <= len(one) < len(calls) // 2
    assert len(queued_indices(1, calls[:3])) == MIN_QUEUED  # a short schedule: the minimum
    assert queued_indices(1, calls[:1]) == {0}  # fewer plain calls than that: what there is


def test_on_the_cpu_nothing_is_queued():
    x = torch.randn(4, 4)
    inputs, staged = queue_behind_work([x, 3], "cpu")
    assert inputs[0] is x and staged == []


def _judge(wrong: set[int], queued: set[int]) -> list[str]:
    calls = [{"index": i, "kind": "fresh", "dist": "normal", "base": None,
              "output": pack(torch.full((2, 2), float(i)))} for i in range(20)]
    judge = ScheduleJudge({"calls": calls, "timed_from": 10}, lambda dtype: (1e-5, 1e-5))
    for i in range(20):
        value = -1.0 if i in wrong else float(i)
        judge.observe({"kind": "schedule-call", "index": i, "output": pack(torch.full((2, 2), value)),
                       "queued": i in queued})
    found: list[str] = []
    judge.judge(lambda code, trial, evidence, **fields: found.append(code))
    return found


def test_wrong_only_behind_queued_work_is_work_not_ordered_after_the_stream():
    assert _judge({2, 9, 15}, {2, 9, 15}) == ["GK641"]
    assert _judge(set(), {2, 9, 15}) == []


def test_wrong_on_calls_that_started_idle_too_is_judged_as_before():
    assert _judge({2, 9, 15, 4}, {2, 9, 15}) == ["GK677"]
    assert _judge(set(range(20)), {2, 9, 15}) == ["GK677"]


def test_work_left_running_after_a_queued_call_is_a_stream_escape():
    from gatekeeper.behaviour.schedule_checks import judge_calls

    messages = [{"kind": "schedule-call", "index": i, "stream_escape": i == 7} for i in range(12)]
    found: list[tuple[str, str]] = []
    judge_calls(messages, {}, lambda code, trial, evidence, **fields: found.append((code, evidence["where"])))
    assert found == [("GK640", "scheduled call 7 (1 of 12)")]
    judge_calls([dict(m, stream_escape=False) for m in messages], {}, lambda *a, **k: found.append(a[0]))
    assert len(found) == 1
