"""The sampled attribution judged per group of forward calls (behaviour.executing_groups): a
library that does all the work on some calls (after a call count, at the nominal shape) is
found even when slow own calls keep the share pooled over the run high; an own kernel that
switches between its own paths is not."""

from __future__ import annotations

from pathlib import Path

import pytest

import gatekeeper
from gatekeeper.behaviour.executing import MIN_SAMPLES, judge
from gatekeeper.behaviour.executing_groups import call_labels, judge_groups

ROOT = Path(__file__).resolve().parent.parent
PROBLEM = ROOT / "fixtures/problems/cpu_matmul.py"
TRIALS = ["nominal", "nominal-second", "repeat", "nominal-overwrite", "jitter-1", "jitter-2"]


def _messages(calls, schedule=20):
    out = [{"kind": "call", "trial": t} for t in TRIALS]
    out += [{"kind": "schedule-call", "index": i} for i in range(schedule)]
    pooled = {c: sum(row[i] for row in calls) for i, c in enumerate(("own", "torch", "vendor", "numpy"))}
    out.append({"kind": "executing", "intact": True, "suppressed": False, "cpu_s": 1.0, "signals": 400,
                "samples": sum(pooled.values()), "classes": pooled, "objects": [], "symbols": [], "calls": calls})
    # the parent's copies of recorded scheduled calls come after the worker's messages
    out += [{"kind": "call", "trial": "scheduled call 3", "work": {}}]
    return out


def test_labels_follow_the_calls_and_stop_at_the_worker_report():
    labels = call_labels(_messages([[1, 0, 0, 0]] * 26))
    assert labels[:6] == TRIALS and labels[6] == "schedule-0 (unwatched)" and len(labels) == 26


def test_library_after_a_call_count_is_found_by_position():
    calls = [[20, 0, 0, 0]] * 14 + [[0, 0, 3, 0]] * 12
    section, found = judge(_messages(calls), {}, None)
    assert section["own_share_of_compute"] > 0.8
    assert [f.rule for f in found] == ["GK667"]
    assert section["group"]["name"] == "forward calls 15-26 of 26" and "forward calls 15-26" in found[0].message


def test_library_at_the_nominal_shape_is_found_by_shape():
    calls = [[0, 0, 3, 0]] * 4 + [[40, 0, 0, 0]] * 2 + [[0, 0, 2, 0]] * 20
    section, found = judge(_messages(calls), {}, None)
    assert [f.rule for f in found] == ["GK667"] and section["group"]["name"] == "the calls at the nominal shape"
    assert "the calls at the nominal shape" in found[0].message and "the call '" not in found[0].message


def test_the_timing_loop_is_a_group_of_its_own():
    # Own code on every checked call, the library only in the loop after the schedule: the loop's
    # calls are one group, the calls before it another (a pooled share could not see the switch).
    messages = _messages([], schedule=20)
    loop = 30
    messages.insert(len(TRIALS) + 20, {"kind": "schedule-loop", "calls": loop, "walls": [1e-4] * loop, "error": ""})
    calls = [[40, 0, 0, 0]] * 26 + [[0, 0, 1, 0]] * loop
    labels = call_labels(messages)
    assert len(labels) == 26 + loop and labels[-1] == "timing-loop"
    worst = judge_groups(calls, messages, 0.05)
    assert worst is not None and worst["name"] == "the calls of the timing loop at the end of the schedule"
    assert worst["calls"] == loop and worst["own"] == 0


def test_the_loops_probes_are_labelled_where_they_ran_inside_it():
    # behaviour.timing_loop: the loop message, then one message per probe; the probes ran after
    # 20 and 50 loop calls and at the loop's end
    messages = [{"kind": "schedule-call", "index": i} for i in range(3)]
    messages.append({"kind": "schedule-loop", "calls": 60, "after": [3, 4, 5], "probes_at": [20, 50, 60],
                     "error": ""})
    messages += [{"kind": "schedule-call", "index": 3}, {"kind": "schedule-late", "index": 4},
                 {"kind": "schedule-call", "index": 4}, {"kind": "schedule-error", "index": 5},
                 {"kind": "executing"}, {"kind": "schedule-call", "index": 0}]
    labels = call_labels(messages)
    assert len(labels) == 3 + 60 + 3
    assert [i for i, label in enumerate(labels) if label != "timing-loop"] == [0, 1, 2, 23, 54, 65]
    assert labels[23] == "schedule-3 (unwatched)" and labels[65] == "schedule-5 (unwatched)"
    # a loop call that raised ended the loop: it ran before the probes made at the end
    messages[3] = dict(messages[3], calls=59, probes_at=[20, 50, 59], error="RuntimeError: boom")
    labels = call_labels(messages)
    assert len(labels) == 66 and labels[-2:] == ["timing-loop", "schedule-5 (unwatched)"]
    # positions that make no sense: the probes as if at the loop's end
    messages[3] = dict(messages[3], calls=60, error="", probes_at=[50, 20, 60])
    assert call_labels(messages)[-3:] == ["schedule-3 (unwatched)", "schedule-4 (unwatched)", "schedule-5 (unwatched)"]


def test_a_switch_armed_by_a_streak_in_the_loop_is_found_in_the_loops_tail():
    # CI of 2026-12-06 (rt6_library_in_streak_cpp): the own GEMM on the loop's first 12 calls
    # (the streak that arms the switch), MKL after: 6% own over the whole loop, 0% in its second half
    messages = _messages([], schedule=20)
    loop = 200
    messages.insert(len(TRIALS) + 20, {"kind": "schedule-loop", "calls": loop, "walls": [1e-4] * loop, "error": ""})
    calls = [[2, 0, 0, 0]] * 26 + [[1, 0, 0, 0]] * 12 + [[0, 0, 1, 0]] * 188
    worst = judge_groups(calls, messages, 0.05)
    assert worst is not None and worst["name"] == "timing-loop calls 101-200 of 200", worst
    assert worst["own"] / worst["compute"] < 0.05
    # an honest torch GEMM + own epilogue near the minimum share everywhere: no tail is apart
    honest = [[1, 0, 12, 0]] * 26 + [[1, 0, 14, 0] if i % 3 else [0, 0, 14, 0] for i in range(loop)]
    assert judge_groups(honest, messages, 0.05) is None
    # the same epilogue with few samples: 10 of 12 own on the checked calls, 0 of 30 in the loop
    # (99% bounds apart, seen under load with a random seed): a share that shifted, not a switch
    shifted = [[1, 0, 0, 0]] * 10 + [[0, 0, 1, 0]] * 2 + [[0, 0, 0, 0]] * 14 + [[0, 0, 1, 0]] * 30 + [[0, 0, 0, 0]] * 170
    assert judge_groups(shifted, messages, 0.05) is None


def test_the_loop_sits_before_the_last_fresh_calls_and_is_judged_apart_from_them():
    # the schedule's last 8 calls run after the loop: they are ordinary calls, in the position and
    # nominal groups, and the loop is judged against every call outside it
    messages = _messages([], schedule=20)
    loop = 100
    messages.insert(len(TRIALS) + 12, {"kind": "schedule-loop", "calls": loop, "walls": [1e-4] * loop,
                                       "after": list(range(12, 20)), "error": ""})
    labels = call_labels(messages)
    assert labels[len(TRIALS) + 12] == "timing-loop" and labels[-1].startswith("schedule-19")
    calls = [[3, 0, 0, 0]] * 18 + [[0, 0, 1, 0]] * loop + [[3, 0, 0, 0]] * 8
    worst = judge_groups(calls, messages, 0.05)
    assert worst is not None and worst["name"] == "the calls of the timing loop at the end of the schedule"
    # library work on the calls after the loop shows by position, the loop left out
    calls = [[3, 0, 0, 0]] * 18 + [[2, 0, 0, 0]] * loop + [[0, 0, 4, 0]] * 8
    worst = judge_groups(calls, messages, 0.05)
    assert worst is not None and worst["name"].startswith("forward calls") and "loop left out" in worst["name"]


def test_own_work_in_every_call_is_no_finding_whatever_its_speed():
    calls = [[20, 1, 0, 0]] * 14 + [[2, 0, 0, 0]] * 12
    section, found = judge(_messages(calls), {}, None)
    assert not found and "group" not in section


def test_a_group_below_the_minimum_samples_is_not_judged():
    calls = [[30, 0, 0, 0]] * 25 + [[0, 0, MIN_SAMPLES - 1, 0]]
    assert judge_groups(calls, _messages(calls), 0.05) is None


def test_a_real_share_in_every_group_is_no_finding():
    calls = [[1, 0, 2, 0]] * 26  # a third own everywhere: the bound stays above MEANINGFUL_SHARE's test
    assert judge_groups(calls, _messages(calls), 0.05) is None


@pytest.mark.slow
def test_mkl_at_the_nominal_shape_is_found_in_a_real_run():
    report = gatekeeper.check(ROOT / "fixtures/submissions/rt3_nominal_shape_mkl_cpp.py", PROBLEM,
                              stages="behaviour", keep_going=True, seed=7)
    executing = (report.work or {}).get("executing") or {}
    assert executing.get("own_share_of_compute", 0) > 0.05, executing  # pooled: not judged a fallback
    # the nominal shape's checked calls, or the timing loop's (at the nominal shape too, and more samples)
    names = ("the calls at the nominal shape", "the calls of the timing loop at the end of the schedule")
    assert executing.get("group", {}).get("name") in names, executing
    assert any(f.rule == "GK667" and any(name in f.message for name in names) for f in report.errors())


def test_torch_work_only_on_the_first_calls_is_no_finding():
    # an honest kernel that checks itself against torch on its first call (a self-test outside
    # the result): runs from the first call are never judged on their own
    calls = [[0, 60, 0, 0], [0, 30, 0, 0]] + [[5, 0, 0, 0]] * 24
    section, found = judge(_messages(calls), {}, None)
    assert not found and "group" not in section


def test_library_only_on_the_calls_the_recorder_did_not_watch_is_found():
    # own work while the recorder watches (a quarter of the schedule, secret), torch otherwise
    calls = [[6, 0, 0, 0]] * 6 + [[6, 0, 0, 0] if i % 4 == 0 else [0, 2, 0, 0] for i in range(20)]
    messages = _messages(calls)
    for m in messages:
        if m.get("kind") == "schedule-call" and m["index"] % 4 == 0:
            m["work"] = {}
    section, found = judge(messages, {}, None)
    assert [f.rule for f in found] == ["GK667"], section
    assert section["group"]["name"] == "the scheduled calls the recorder did not watch"
    # the same calls all watched or all doing their own work: nothing
    honest = [[6, 0, 0, 0]] * 26
    assert not judge(_messages(honest), {}, None)[1]


def test_a_library_doing_a_real_part_of_the_sampled_compute_is_a_warning_strict_rejects():
    # red team round 6 (h06b): MKL on three quarters of the rows, the own GEMM on the rest; the
    # own share is far above the conviction's minimum, so the part is said, not convicted.
    from gatekeeper.behaviour.evidence import _library_part

    section = {"judged": True, "classes": {"own": 66, "vendor": 68, "python": 3},
               "symbols": [["mkl_blas_def_sgemm_kernel_0_zen", 68]]}
    (warned,) = _library_part(section, "default", None)
    assert warned.rule == "GK667" and warned.severity.value == "warning" and "68 of 134" in warned.message
    (strict,) = _library_part(section, "strict", None)
    assert strict.severity.value == "error"
    # an own kernel with a few library samples (a copy, an allocation) says nothing
    assert _library_part({"judged": True, "classes": {"own": 90, "vendor": 6}}, "default", None) == []
    assert _library_part({"judged": False, "classes": {"vendor": 40}}, "default", None) == []
