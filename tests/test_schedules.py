"""The call schedule (issue 15) and value distributions (issue 11 item 2), piece by piece with
real torch: the plan, the one-way secrets, the distributions, near-duplicates, same-address
inputs, small-size jitter and how the parent buckets wrong calls. The end-to-end fixtures
(hacked + honest pairs) are in fixtures/manifest/behaviour.toml."""

import libcst as cst
import pytest
import torch

from gatekeeper.behaviour.schedule_judge import ScheduleJudge
from gatekeeper.behaviour.schedule_inputs import build_inputs
from gatekeeper.behaviour.schedule_subject import plant_decoy
from gatekeeper.problem.implicit import small_input_constants
from gatekeeper.problem.jitter import JitterSpec
from gatekeeper.problem.plan import plan_trials
from gatekeeper.problem.schedule import (
    AGAIN_RUN, HIGH, LATE_AGAIN_RUNS, LATE_WINDOW, LOW, MIN_CALLS, MIN_LARGE_CALLS, Schedule, budgeted_count, plan_schedule,
)
from gatekeeper.problem.secret import derive, init_seed
from gatekeeper.problem.sidecar import Sidecar
from gatekeeper.problem.values import DISTRIBUTIONS, apply_distribution, near_duplicate
from gatekeeper.sandbox.tensors import pack


def test_schedule_is_drawn_per_run_and_reproducible_from_the_seed():
    a, b, again = plan_schedule(1, list(DISTRIBUTIONS)), plan_schedule(2, list(DISTRIBUTIONS)), plan_schedule(1, list(DISTRIBUTIONS))
    assert a.to_json() == again.to_json()
    assert len(a.steps) != len(b.steps) or a.timed_from != b.timed_from
    for plan in (a, b):
        assert LOW <= len(plan.steps) <= HIGH
        assert len(plan.steps) // 4 <= plan.timed_from <= len(plan.steps) // 2
        kinds = {s.kind for s in plan.steps}
        assert kinds == {"fresh", "near-one", "near-sparse", "overwrite", "reuse", "repeat", "again"}
        # `again` calls: the call before's objects, early enough to survive the budget, never two in a row
        agains = [s for s in plan.steps if s.kind == "again" and s.index < MIN_CALLS]
        assert 1 <= len(agains) <= 4 and all(8 <= s.index and s.base == s.index - 1 for s in agains)
        assert any(plan.steps[s.base].kind == "again" for s in agains)  # a run: the same tensors twice in a row
        # Further runs past MIN_CALLS, early in the rest (LATE_WINDOW), each after a call that is not one.
        late = [s.index for s in plan.steps if s.kind == "again" and s.index >= MIN_CALLS]
        assert len(late) == LATE_AGAIN_RUNS * AGAIN_RUN and max(late) < LATE_WINDOW
        starts = [i for i in late if i - 1 not in late]
        assert len(starts) == LATE_AGAIN_RUNS and all(plan.steps[i - 1].kind != "again" for i in starts)
        assert all(plan.steps[i].base == i - 1 and plan.steps[i].dist == "normal" for i in late)
        assert all(s.base is not None and s.base < s.index for s in plan.steps if s.kind.startswith("near"))
        # Repeats copy an earlier fresh call's contents, early enough to survive the budget.
        repeats = [s for s in plan.steps if s.kind == "repeat"]
        assert 3 <= len(repeats) <= 6 and all(6 <= s.index < MIN_CALLS for s in repeats)
        assert all(plan.steps[s.base].kind == "fresh" and s.index - 16 <= s.base <= s.index - 1 for s in repeats)
        # A memo of only the last call's contents (or the last two) is hit too (red team h06, h15).
        assert {1, 2} <= {s.index - s.base for s in repeats if s.index > 7}
        assert len({s.seed for s in plan.steps}) == len(plan.steps)  # no two calls share values
        assert {s.dist for s in plan.steps} - {"normal"} == set(DISTRIBUTIONS)
    assert Schedule.from_json(a.to_json()).to_json() == a.to_json()


def test_the_first_calls_try_every_distribution():
    # The budgets trim most problems past a couple of MiB to MIN_CALLS calls: those still try
    # every allowed distribution (drawn call by call, outliers was missing in a third of runs).
    for seed in range(300):
        plan = plan_schedule(seed, list(DISTRIBUTIONS))
        head = plan.steps[:MIN_CALLS]
        assert {s.dist for s in head if s.kind in ("fresh", "overwrite", "reuse")} - {"normal"} == set(DISTRIBUTIONS)
        assert sum(s.dist != "normal" for s in head[:4]) >= 2
        repeats = [s for s in plan.steps if s.kind == "repeat"]
        assert all(plan.steps[s.base].kind == "fresh" and plan.steps[s.base].dist == "normal" for s in repeats)
        assert all(s.base is not None and s.base < s.index for s in plan.steps if s.kind.startswith("near"))
    limited = plan_schedule(3, ["positive", "outliers"])
    assert {s.dist for s in limited.steps[:MIN_CALLS]} == {"normal", "positive", "outliers"}


def test_the_shortest_schedule_holds_what_the_repeat_probe_needs():
    # A problem over 8 MiB a call is trimmed to MIN_LARGE_CALLS calls: 3 plain fresh calls to
    # time against and 2 repeats of two of them, in every plan (docs/threat-model.md).
    for seed in range(300):
        head = plan_schedule(seed, list(DISTRIBUTIONS)).trimmed(MIN_LARGE_CALLS).steps
        assert len(head) == MIN_LARGE_CALLS
        assert [(s.kind, s.dist) for s in head[3:6]] == [("fresh", "normal")] * 3
        assert [(s.kind, s.base, s.dist) for s in head[6:8]] == [("repeat", 5, "normal"), ("repeat", 4, "normal")]
        assert sum(s.dist != "normal" for s in head[:3]) >= 2  # the value trials stay in the first calls


def test_a_repeat_whose_base_is_no_longer_kept_draws_the_same_contents_again():
    # A large problem keeps only its last calls' inputs in the reference worker: a repeat of an
    # evicted fresh call must still hold exactly its contents (before, it drew new values).
    from types import SimpleNamespace

    from gatekeeper.behaviour.schedule_ref import _one
    from gatekeeper.problem.schedule import Step

    module = SimpleNamespace(get_inputs=lambda: [torch.randn(64, 32), 3])
    base, repeat = Step(3, "fresh", seed=1234), Step(9, "repeat", seed=99, base=3)
    steps = {3: base, 9: repeat}
    first, _ = _one(module, lambda x, k: x * k, base, {}, "cpu", [], steps)
    again, out = _one(module, lambda x, k: x * k, repeat, {}, "cpu", [], steps)
    assert torch.equal(first[0], again[0]) and again[0] is not first[0] and torch.equal(out, first[0] * 3)


def test_sidecar_limits_the_distributions():
    plan = plan_schedule(3, Sidecar.model_validate({"values": {"distributions": ["positive"]}}).values.allowed())
    assert {s.dist for s in plan.steps} == {"normal", "positive"}
    assert Sidecar.model_validate({"values": {"enabled": False}}).values.allowed() == []


def test_the_seed_the_submission_sees_is_not_the_run_seed():
    assert init_seed(7) != 7 and init_seed(7) != 7 ^ 0x1234
    assert derive(7, "init") == init_seed(7) != derive(7, "schedule")
    assert 0 <= init_seed(7) < 2 ** 31


def test_budget_trims_large_problems_and_skips_huge_ones():
    assert budgeted_count(300, 4096, 1e-5) == 300
    assert MIN_CALLS <= budgeted_count(300, 8 << 20, 1e-3) < 300
    assert budgeted_count(300, 1 << 30, 1e-3) == MIN_LARGE_CALLS  # large problems too (issue 22)
    assert budgeted_count(300, 4096, 1.0) == MIN_CALLS


@pytest.mark.parametrize("dist", DISTRIBUTIONS)
def test_distributions_change_floats_only_and_not_fixed_inputs(dist):
    torch.manual_seed(0)
    x, mask, idx = torch.randn(4, 16, 48), torch.randn(4, 16), torch.randint(0, 5, (7,))
    out = apply_distribution([x, mask, idx, 3], dist, seed=11, fixed=[1])
    assert out[1] is mask and out[2] is idx and out[3] == 3
    assert out[0].shape == x.shape and out[0].dtype == x.dtype
    assert not torch.equal(out[0], x)
    again = apply_distribution([x, mask, idx, 3], dist, seed=11, fixed=[1])
    assert torch.equal(out[0], again[0])


def test_distributions_have_the_property_they_are_named_for():
    torch.manual_seed(0)
    x = torch.randn(8, 32, 64)
    assert bool((apply_distribution([x], "positive", 1, [])[0] >= 0).all())
    assert float((apply_distribution([x], "sparse", 1, [])[0] == 0).float().mean()) > 0.8
    up = apply_distribution([x], "scale-up", 1, [])[0]
    assert float(up.abs().max()) >= 10 * float(x.abs().max()) * 0.999
    outliers = apply_distribution([x], "outliers", 1, [])[0]
    changed = (outliers != x).sum()
    assert 1 <= int(changed) <= 4 and float(outliers.abs().max()) >= 100
    rows = apply_distribution([x], "zero-rows", 1, [])[0]
    zero_slices = [(rows.select(d, i) == 0).all() for d in range(2) for i in range(rows.shape[d])]
    assert any(bool(z) for z in zero_slices) and not bool((rows == 0).all())


def test_near_duplicates_differ_in_one_element_or_a_sparse_set():
    torch.manual_seed(0)
    x = torch.randn(4, 16, 48)
    one = near_duplicate([x], sparse=False, seed=5, fixed=[])[0]
    assert int((one != x).sum()) == 1
    assert float((one - x).abs().max()) > 1.0  # well outside any tolerance
    sparse = near_duplicate([x], sparse=True, seed=5, fixed=[])[0]
    assert 1 < int((sparse != x).sum()) < x.numel() // 20
    assert torch.equal(near_duplicate([x], False, 5, fixed=[0])[0], x)


def test_reuse_gives_new_values_at_the_same_address_with_the_same_version():
    first = build_inputs("fresh", [pack(torch.randn(4, 16, 48))], None, "cpu")
    ptr, version = first[0].data_ptr(), first[0]._version
    values = torch.randn(4, 16, 48)
    second = build_inputs("reuse", [pack(values)], first, "cpu")
    assert second[0] is not first[0]
    assert second[0].data_ptr() == ptr and second[0]._version == version
    assert torch.equal(second[0], values)
    third = build_inputs("overwrite", [pack(torch.zeros(4, 16, 48))], second, "cpu")
    assert third[0] is second[0] and float(third[0].abs().sum()) == 0.0
    fresh = build_inputs("fresh", [pack(values)], third, "cpu")
    assert fresh[0]._version == version  # every scheduled input looks alike to a version check


def test_decoy_looks_like_the_timing_worker():
    import torch.nn as nn

    plant_decoy()
    assert any(c.__name__ == "Model" for c in nn.Module.__subclasses__())
    import sys

    with pytest.raises(RuntimeError):
        sys.modules["gk_problem"].Model()(torch.zeros(1))


SMALL = """
import torch
ranks = 4
rows = 16
kernel = 3
def get_inputs():
    return [torch.randn(ranks, rows, kernel * 8)]
def get_init_inputs():
    return [kernel]
"""


def test_small_input_sizes_are_jittered_by_one_but_not_init_arguments():
    assert small_input_constants(cst.parse_module(SMALL), 8) == {"ranks": 4}
    trials, constants = plan_trials(SMALL, Sidecar(), seed=3, shapes=4, low=0.5, high=2.0)
    assert constants["ranks"] == 4 and "kernel" not in constants
    first = {t.name: t.attempts[0].constants["ranks"] for t in trials if t.jittered}
    assert set(first.values()) == {3, 5}
    assert all(t.attempts[-1].constants["ranks"] == 4 for t in trials if t.jittered)  # last attempt: nominal
    assert JitterSpec(scale=0.5).nominal is False


def _reference(kinds):
    calls = []
    for index, (kind, dist, base) in enumerate(kinds):
        calls.append({"index": index, "kind": kind, "dist": dist, "base": base,
                      "output": pack(torch.full((2, 2), float(index)))})
    return {"calls": calls, "timed_from": 10}


def _judge(kinds, wrong, addresses=None, cached=True, loop=None):
    """`wrong` calls return -1, except wrong near-duplicates: their base's result when `cached`
    (what a cache keyed on sampled elements returns), else a value that is neither. `loop`: the
    timing loop's message, observed before the calls (its probes are reported after it)."""
    judge = ScheduleJudge(_reference(kinds), lambda dtype: (1e-5, 1e-5))
    if loop is not None:
        judge.observe(dict(loop, kind="schedule-loop"))
    for index in range(len(kinds)):
        kind, _, base = kinds[index]
        value = float(index) if index not in wrong else float(base) if cached and kind.startswith("near") else -1.0
        message = {"kind": "schedule-call", "index": index, "output": pack(torch.full((2, 2), value))}
        if addresses is not None:
            message["addresses"] = [addresses[index]]
        judge.observe(message)
    found = []
    judge.judge(lambda code, trial, evidence, **fields: found.append(code))
    return found


PLAIN = [("fresh", "normal", None)] * 20


def test_judge_names_the_mechanism_of_each_wrong_call():
    kinds = list(PLAIN)
    kinds[5] = ("near-one", "normal", 4)
    kinds[6] = ("reuse", "normal", None)
    kinds[7] = ("overwrite", "normal", None)
    assert _judge(kinds, set()) == []
    assert _judge(kinds, {5}) == ["GK671"]
    # Wrong but not the base's result: the output followed the change and got the new values
    # wrong (a clamp to the benchmark's range), which is no cache: an input-value error.
    assert _judge(kinds, {5}, cached=False) == ["GK673"]
    assert _judge(kinds, {6}) == ["GK672"]
    assert _judge(kinds, {7}) == ["GK611"]
    alternating = [("reuse", "normal", None) if i % 2 else ("fresh", "normal", None) for i in range(20)]
    wrong = {i for i in range(20) if i % 2} | {4, 8}  # every same-address call, some others
    assert "GK672" in _judge(alternating, wrong)
    kinds[8] = ("fresh", "outliers", None)
    kinds[9] = ("near-sparse", "normal", 8)
    assert _judge(kinds, {8, 9}) == ["GK673"]  # the near-duplicate inherits its base's structure


def test_calls_on_a_wrong_calls_very_inputs_are_judged_as_it():
    # `again` calls hand the tensors of the call before once more, a repeat its contents: wrong
    # because their base was, they are no plain error (a random seed once made the clamp of
    # value_sniff_clamp_gemm_cpp GK677 through a run of `again` calls after a near-duplicate).
    kinds = list(PLAIN)
    kinds[5] = ("near-one", "normal", 4)
    kinds[6], kinds[7] = ("again", "normal", 5), ("again", "normal", 6)
    assert _judge(kinds, {5, 6, 7}, cached=False) == ["GK673"]
    kinds[9] = ("fresh", "outliers", None)
    kinds[10] = ("repeat", "normal", 9)
    assert _judge(kinds, {9, 10}) == ["GK673"]
    # Right where the base was right: an `again` call's own error stays a plain one.
    assert _judge(kinds, {6}) == ["GK677"]


def test_a_loop_probe_written_into_the_loops_tensors_is_judged_as_an_overwrite():
    # behaviour.timing_loop: the last plain fresh calls write their values into the loop's own
    # tensors; a memo keyed on identity that ignores `_version` answers them with the loop's result
    probes = {"after": [16, 17, 18, 19], "in_place": [16, 17, 18, 19], "calls": 400}
    assert _judge(list(PLAIN), {17, 18}, loop=probes) == ["GK611"]
    assert _judge(list(PLAIN), {16, 17, 18, 19}, loop=probes) == ["GK611"]  # every probe: each follows the loop
    # a probe that got new tensors (a shape that did not fit) stays a plain fresh call
    found = _judge(list(PLAIN), {17, 18}, loop=dict(probes, in_place=[16]))
    assert found and "GK611" not in found


def test_a_stale_answer_is_told_from_a_wrong_one():
    from gatekeeper.behaviour.compare import stale_where_wrong

    tol = lambda dtype: (1e-5, 1e-5)  # noqa: E731
    base = torch.zeros(4, 3)
    now = base.clone()
    now[1], now[2] = 5.0, 7.0  # the near-duplicate's right answer: rows 1 and 2 changed
    assert stale_where_wrong(pack(now), pack(base), pack(base), tol)  # the base's result, whole
    per_row = now.clone()
    per_row[1] = 0.0  # a per-row cache: row 1 stale, row 2 recomputed
    assert stale_where_wrong(pack(now), pack(per_row), pack(base), tol)
    clamped = now.clone()
    clamped[1] = 3.0  # followed the change, wrongly (a clamp): neither answer
    assert not stale_where_wrong(pack(now), pack(clamped), pack(base), tol)
    assert not stale_where_wrong(pack(now), pack(torch.zeros(2, 3)), pack(base), tol)
    nan = now.clone()
    nan[1] = float("nan")
    assert not stale_where_wrong(pack(now), pack(nan), pack(base), tol)


def test_fresh_calls_that_land_on_a_used_address_count_as_address_reuse():
    # The allocator hands some fresh calls an earlier input's address: a cache keyed on
    # the address fails exactly there (the CPU case of sched_ptr_version_cache).
    addresses = [4096 * (i % 7) + 4096 for i in range(20)]  # calls 7.. reuse addresses
    at_used = {i for i in range(20) if i >= 7}
    assert _judge(PLAIN, at_used, addresses) == ["GK672"]
    # Wrong at new addresses too: not an address cache, a plain error.
    assert _judge(PLAIN, at_used | {1, 2, 3}, addresses) != ["GK672"]
    # Without addresses (an older worker), the old rules apply.
    assert _judge(PLAIN, at_used) == ["GK677"]


def test_judge_tells_timing_detection_from_arming_from_plain_errors():
    assert _judge(PLAIN, set(range(10, 20))) == ["GK676"]  # wrong from timed_from on
    assert _judge(PLAIN, set(range(9, 20))) == ["GK674"]  # wrong after a correct run of 9
    assert _judge(PLAIN, set(range(0, 20))) == ["GK677"]
    assert _judge(PLAIN, {3}) == ["GK677"]
    assert _judge(PLAIN, {12}) == ["GK677"]  # a lone wrong call late in the run is not arming


def test_judge_reports_late_writes_and_errors():
    judge = ScheduleJudge(_reference(PLAIN), lambda dtype: (1e-5, 1e-5))
    judge.observe({"kind": "schedule-late", "index": 4})
    judge.observe({"kind": "schedule-error", "index": 2, "type": "RuntimeError", "message": "boom"})
    found = []
    judge.judge(lambda code, trial, evidence, **fields: found.append(code))
    assert found == ["GK675", "GK660"]
