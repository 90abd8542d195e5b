"""The repeated-contents probe (gatekeeper.behaviour.repeat_probe, GK678): a memo keyed by the
inputs' contents is right on every input but skips the work when contents repeat."""

from __future__ import annotations

from pathlib import Path

import pytest

import gatekeeper
from gatekeeper.behaviour.repeat_probe import RepeatProbe

ROOT = Path(__file__).resolve().parent.parent
PROBLEM = ROOT / "fixtures/problems/cpu_matmul_small.py"


def _probe(fresh_s: float, repeat_s: float, repeats: int = 5, fresh: int = 12) -> tuple[dict, list]:
    calls = [{"index": i, "kind": "fresh", "dist": "normal"} for i in range(4, 4 + fresh)]
    calls += [{"index": 100 + i, "kind": "repeat", "dist": "normal", "base": 4} for i in range(repeats)]
    probe = RepeatProbe({"calls": calls})
    for c in calls:
        probe.observe({"kind": "schedule-call", "index": c["index"],
                       "wall_s": repeat_s if c["kind"] == "repeat" else fresh_s})
    added: list = []
    measured = probe.judge(lambda code, trial, evidence, **fields: added.append((code, fields["detail"])))
    return measured, added


def test_repeats_much_faster_than_fresh_calls_are_a_content_memo():
    measured, added = _probe(fresh_s=5e-3, repeat_s=3e-4)
    assert measured["judged"] and [code for code, _ in added] == ["GK678"]
    assert "300 us" in added[0][1] and "5000 us" in added[0][1]


@pytest.mark.parametrize("fresh_s, repeat_s, repeats", [
    (5e-3, 4.5e-3, 5),  # the same work: honest
    (5e-5, 1e-6, 5),  # calls too short to tell from timer noise: not judged
    (5e-3, 3e-4, 2),  # too few repeats survived the budget: not judged
])
def test_no_finding_without_a_clear_difference(fresh_s, repeat_s, repeats):
    _, added = _probe(fresh_s, repeat_s, repeats)
    assert added == []


def _walls(fresh: list[float], repeats: list[float]) -> list:
    calls = [{"index": 4 + i, "kind": "fresh", "dist": "normal"} for i in range(len(fresh))]
    calls += [{"index": 100 + i, "kind": "repeat", "dist": "normal", "base": 4} for i in range(len(repeats))]
    probe = RepeatProbe({"calls": calls})
    for c, wall in zip(calls, fresh + repeats):
        probe.observe({"kind": "schedule-call", "index": c["index"], "wall_s": wall})
    added: list = []
    probe.judge(lambda code, trial, evidence, **fields: added.append(code))
    return added


def test_load_that_slows_most_fresh_calls_is_not_a_memo():
    """Measured with two busy processes on two cores: an honest GEMM's fresh calls, spread over
    the schedule, mostly ran descheduled (median 7 ms) while its repeats did not (1.5 ms)."""
    fresh = [1.5e-3] * 4 + [7e-3] * 9
    assert _walls(fresh, [1.54e-3] * 6) == []
    # A memo stays caught when the load lands on most of its repeats instead.
    assert _walls(fresh, [3e-4, 2e-4, 6e-3, 7e-3, 5e-3, 8e-3]) == ["GK678"]


@pytest.mark.slow
def test_a_content_memo_is_caught_and_the_same_kernel_without_it_passes():
    hacked = gatekeeper.check(ROOT / "fixtures/submissions/cpu_content_memo_gemm.py", PROBLEM, stages="behaviour",
                              keep_going=True)
    # Only GK678: the memo is right on every input and must run (a GK660 here means it raised).
    assert {f.rule for f in hacked.errors() if f.stage.value == "behaviour"} == {"GK678"}, \
        [(f.rule, f.message) for f in hacked.errors()]
    honest = gatekeeper.check(ROOT / "fixtures/submissions/cpu_own_gemm_cpp.py", PROBLEM, stages="behaviour")
    assert honest.verdict.value == "pass", [(f.rule, f.message) for f in honest.findings]
