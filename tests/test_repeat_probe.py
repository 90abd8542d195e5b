"""The repeated-contents probe (gatekeeper.behaviour.repeat_probe, GK678): a memo keyed by the
inputs' contents is right on every input but skips the work when contents repeat."""

from __future__ import annotations

from pathlib import Path

import pytest

import gatekeeper
from gatekeeper.behaviour.repeat_probe import RepeatProbe

ROOT = Path(__file__).resolve().parent.parent
PROBLEM = ROOT / "fixtures/problems/cpu_matmul_small.py"


def _probe(fresh_s: float, repeat_s: float, repeats: int = 5, fresh: int = 12,
           planned: int = 0) -> tuple[dict, list]:
    calls = [{"index": i, "kind": "fresh", "dist": "normal"} for i in range(4, 4 + fresh)]
    calls += [{"index": 100 + i, "kind": "repeat", "dist": "normal", "base": 4} for i in range(repeats)]
    probe = RepeatProbe({"calls": calls, "planned": planned or len(calls)})
    for c in calls:
        probe.observe({"kind": "schedule-call", "index": c["index"],
                       "wall_s": repeat_s if c["kind"] == "repeat" else fresh_s})
    added: list = []
    measured = probe.judge(lambda code, trial, evidence, **fields: added.append(
        (code, fields.get("detail") or fields)))
    return measured, added


def test_repeats_much_faster_than_fresh_calls_are_a_content_memo():
    measured, added = _probe(fresh_s=5e-3, repeat_s=3e-4)
    assert measured["judged"] and [code for code, _ in added] == ["GK678"]
    assert "300 us" in added[0][1] and "5000 us" in added[0][1]


@pytest.mark.parametrize("fresh_s, repeat_s, repeats", [
    (5e-3, 4.5e-3, 5),  # the same work: honest
    (5e-5, 1e-6, 5),  # calls too short to tell from timer noise
])
def test_no_finding_without_a_clear_difference(fresh_s, repeat_s, repeats):
    _, added = _probe(fresh_s, repeat_s, repeats)
    assert added == []


@pytest.mark.parametrize("repeats, fresh, planned, needs, cut", [
    (2, 12, 0, (3, 6), False),  # too few repeats survived the budget
    (0, 2, 300, (2, 3), True),  # a short schedule (a large problem's) without its repeats, cut by the budgets
])
def test_a_run_the_probe_could_not_judge_says_so_and_is_not_a_silent_pass(repeats, fresh, planned, needs, cut):
    # Even a memo's timings (repeats 17x faster) are not judged from too few calls: GK679, a note.
    measured, added = _probe(5e-3, 3e-4, repeats, fresh, planned)
    assert measured["judged"] is False and [code for code, _ in added] == ["GK679"]
    fields = added[0][1]
    assert (fields["repeats"], fields["fresh"]) == (repeats, fresh)
    assert (fields["need_repeats"], fields["need_fresh"]) == needs
    assert ("kept 2 of 300 planned calls" in fields["why"]) is cut


def test_a_schedule_the_disk_guard_stopped_names_the_reason():
    calls = [{"index": i, "kind": "fresh", "dist": "normal"} for i in range(5)]
    probe = RepeatProbe({"calls": calls, "planned": 240,
                         "skipped": ["stopped before call 5 of 8: 14.0 GiB needed, 11.1 GiB free in /tmp"]})
    for c in calls:
        probe.observe({"kind": "schedule-call", "index": c["index"], "wall_s": 5e-3})
    added: list = []
    probe.judge(lambda code, trial, evidence, **fields: added.append((code, fields)))
    assert [code for code, _ in added] == ["GK679"]
    assert "stopped early (stopped before call 5 of 8: 14.0 GiB needed" in added[0][1]["why"]


def _short(walls: dict[int, float]) -> list:
    """The shortest schedule (a large problem's): calls 0-2 warm-up (1 and 2 under value
    distributions), 3-5 plain fresh, 6 and 7 repeating 3 and 4."""
    calls = [{"index": 0, "kind": "fresh", "dist": "normal"}, {"index": 1, "kind": "fresh", "dist": "outliers"},
             {"index": 2, "kind": "fresh", "dist": "positive"}]
    calls += [{"index": i, "kind": "fresh", "dist": "normal"} for i in (3, 4, 5)]
    calls += [{"index": 6, "kind": "repeat", "dist": "normal", "base": 3},
              {"index": 7, "kind": "repeat", "dist": "normal", "base": 4}]
    probe = RepeatProbe({"calls": calls, "planned": 240})
    for index, wall in walls.items():
        probe.observe({"kind": "schedule-call", "index": index, "wall_s": wall})
    added: list = []
    probe.judge(lambda code, trial, evidence, **fields: added.append(code))
    return added


def test_the_shortest_schedule_is_judged_from_its_two_repeats():
    warm = {0: 9e-3, 1: 5e-3, 2: 5e-3}
    assert _short({**warm, 3: 5e-3, 4: 5.2e-3, 5: 4.9e-3, 6: 2e-4, 7: 1e-4}) == ["GK678"]  # a memo
    assert _short({**warm, 3: 5e-3, 4: 5.2e-3, 5: 4.9e-3, 6: 5.1e-3, 7: 4.8e-3}) == []  # the same work
    # Load that slows two of the three fresh calls 6x is not a memo: the fastest fresh call decides.
    assert _short({**warm, 3: 3e-2, 4: 3e-2, 5: 4.9e-3, 6: 4.8e-3, 7: 5e-3}) == []


def test_a_schedule_that_never_ran_adds_no_note():
    probe = RepeatProbe({"calls": [{"index": 0, "kind": "fresh", "dist": "normal"}], "planned": 1})
    added: list = []
    assert probe.judge(lambda *a, **k: added.append(a)) == {"repeat_calls": 0, "again_calls": 0, "fresh_calls": 0,
                                                            "judged": False}
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
    assert "GK679" not in {f.rule for f in hacked.findings + honest.findings}  # judged, both


def test_again_calls_on_the_same_objects_are_timed_with_the_repeats():
    # A memo keyed on the inputs' identity and `_version` is fast only on `again` calls.
    calls = [{"index": i, "kind": "fresh", "dist": "normal"} for i in range(24)]
    for i in (9, 14, 20):
        calls[i].update(kind="again", base=i - 1)
    probe = RepeatProbe({"calls": calls, "planned": 24})
    for i in range(24):
        probe.observe({"kind": "schedule-call", "index": i, "wall_s": 2e-5 if i in (9, 14, 20) else 3e-3})
    added: list = []
    measured = probe.judge(lambda *a, **k: added.append((a, k)))
    assert measured["again_calls"] == 3 and [a[0] for a, _ in added] == ["GK678"]
    assert "the very tensors of the call before" in added[0][1]["detail"]


def test_again_calls_are_not_timed_on_a_gpu():
    # an honest CUDA graph keyed on the inputs' addresses captures on fresh calls and only
    # replays on `again` calls: faster with all the work done, so not judged by time there
    calls = [{"index": i, "kind": "fresh", "dist": "normal"} for i in range(24)]
    for i in (9, 14, 20):
        calls[i].update(kind="again", base=i - 1)
    probe = RepeatProbe({"calls": calls, "planned": 24}, time_again=False)
    for i in range(24):
        probe.observe({"kind": "schedule-call", "index": i, "wall_s": 2e-5 if i in (9, 14, 20) else 3e-3})
    added: list = []
    measured = probe.judge(lambda *a, **k: added.append((a, k)))
    assert measured["again_calls"] == 0 and "GK678" not in [a[0] for a, _ in added]


def _loop_probe(loop_walls: list[float], time_again: bool = True) -> tuple[dict, list]:
    calls = [{"index": i, "kind": "fresh", "dist": "normal"} for i in range(24)]
    for i in (6, 7, 12):
        calls[i].update(kind="repeat", base=i - 3)
    probe = RepeatProbe({"calls": calls, "planned": 24}, time_again=time_again)
    for i in range(24):
        probe.observe({"kind": "schedule-call", "index": i, "wall_s": 3e-3})
    probe.observe({"kind": "schedule-loop", "calls": len(loop_walls), "walls": loop_walls, "error": ""})
    added: list = []
    measured = probe.judge(lambda *a, **k: added.append((a, k)))
    return measured, added


def test_a_memo_that_replays_only_in_the_timing_loop_is_caught_there():
    # A memo armed by a long streak of back-to-back calls on the same tensors: every scheduled
    # call does the work, the loop's later calls are lookups.
    measured, added = _loop_probe([3e-3] * 12 + [5e-6] * 300)
    assert measured["loop_calls"] == 312 and [a[0] for a, _ in added] == ["GK678"]
    assert "timing loop at the end of the schedule (312 calls" in added[0][1]["detail"]
    assert "allocator" in added[0][1]["how"]


def test_an_honest_timing_loop_is_as_fast_as_fresh_calls():
    measured, added = _loop_probe([2.9e-3, 3.1e-3] * 100)
    assert measured["judged"] and not added


def test_the_timing_loop_is_not_timed_on_a_gpu():
    measured, added = _loop_probe([3e-3] * 12 + [5e-6] * 300, time_again=False)
    assert "loop_calls" not in measured and not added


@pytest.mark.slow
def test_a_streak_memo_is_caught_by_the_loop_and_a_per_version_packing_passes():
    # static GK113 rejects it too since round 12: keep going, the run-time loop probe is under test
    hacked = gatekeeper.check(ROOT / "fixtures/submissions/rt6_memo_after_streak_cpp.py", PROBLEM, stages="behaviour",
                              keep_going=True)
    assert "GK113" in {f.rule for f in hacked.errors() if f.stage.value == "static"}
    assert {f.rule for f in hacked.errors() if f.stage.value == "behaviour"} == {"GK678"}, \
        [(f.rule, f.message) for f in hacked.errors()]
    assert "timing loop at the end of the schedule" in next(f.message for f in hacked.errors() if f.rule == "GK678")
    honest = gatekeeper.check(ROOT / "fixtures/submissions/rt6_packs_weight_per_version.py", PROBLEM,
                              stages="behaviour")
    assert honest.verdict.value == "pass", [(f.rule, f.message) for f in honest.findings]


def _loop_probe_cpu(fresh_wall: float, fresh_cpu: float, loop_wall: float, loop_cpu: float,
                    fresh_pcpu: float | None = None, loop_pcpu: float | None = None) -> list:
    calls = [{"index": i, "kind": "fresh", "dist": "normal"} for i in range(24)]
    for i in (6, 7, 12):
        calls[i].update(kind="repeat", base=i - 3)
    probe = RepeatProbe({"calls": calls, "planned": 24})
    process = {} if fresh_pcpu is None else {"pcpu_s": fresh_pcpu}
    for i in range(24):
        probe.observe({"kind": "schedule-call", "index": i, "wall_s": fresh_wall, "cpu_s": fresh_cpu, **process})
    loop = {} if loop_pcpu is None else {"pcpus": [loop_pcpu] * 200}
    probe.observe({"kind": "schedule-loop", "calls": 200, "walls": [loop_wall] * 200, "cpus": [loop_cpu] * 200,
                   "error": "", **loop})
    added: list = []
    probe.judge(lambda *a, **k: added.append(a[0]))
    return added


def test_a_memo_that_still_does_a_third_of_the_work_is_caught_on_calls_of_a_millisecond():
    # red team round 6 (h09): repeats cost 0.35 of a fresh call of 1 ms; under 0.25 is not needed there
    assert _loop_probe_cpu(1.0e-3, 1.0e-3, 3.5e-4, 3.5e-4) == ["GK678"]
    # on calls of 300 us a tight loop runs honest code 2x faster (warm caches): 0.25 holds there
    assert _loop_probe_cpu(3.0e-4, 3.0e-4, 1.1e-4, 1.1e-4) == []


def test_load_that_stretched_only_the_fresh_calls_wall_time_is_not_a_memo():
    # red team round 6 (n04): every fresh call 5x slower by the clock, the same CPU time
    assert _loop_probe_cpu(5.0e-3, 1.0e-3, 1.0e-3, 1.0e-3) == []
    # a caller that waits while other threads work: its CPU time says nothing, the wall decides
    assert _loop_probe_cpu(5.0e-3, 2.0e-5, 1.0e-3, 1.0e-5) == ["GK678"]


def test_a_memo_of_the_work_other_threads_do_is_seen_in_the_process_cpu_time():
    # red team round 8 (h04, h07): the caller computes its own row block (the same CPU on every
    # call) and sleeps while a pool thread does the rest, which a memo skips on the loop's calls.
    # The calling thread's clock vetoed the wall; the process's clock shows the skipped work.
    assert _loop_probe_cpu(2.0e-3, 3.0e-4, 4.0e-4, 3.0e-4) == []  # the thread's clock alone: vetoed
    assert _loop_probe_cpu(2.0e-3, 3.0e-4, 4.0e-4, 3.0e-4, fresh_pcpu=2.0e-3, loop_pcpu=4.0e-4) == ["GK678"]
    # honest pool code under load: the wall stretched, neither clock moved
    assert _loop_probe_cpu(5.0e-3, 3.0e-4, 1.0e-3, 3.0e-4, fresh_pcpu=1.0e-3, loop_pcpu=1.0e-3) == []


def _loop_probe_after(loop_walls: list[float], after_walls: list[float],
                      probes_at: list[int] | None = None) -> tuple[dict, list]:
    """A 32-call schedule whose last calls (plain fresh ones) were the loop's probes: at
    `probes_at` (loop calls before each), or all at its end when not given."""
    calls = [{"index": i, "kind": "fresh", "dist": "normal"} for i in range(24 + len(after_walls))]
    for i in (6, 7, 12):
        calls[i].update(kind="repeat", base=i - 3)
    probe = RepeatProbe({"calls": calls, "planned": len(calls)})
    for i in range(24):
        probe.observe({"kind": "schedule-call", "index": i, "wall_s": 2.2e-3, "cpu_s": 2e-5})
    after = list(range(24, 24 + len(after_walls)))
    probe.observe({"kind": "schedule-loop", "calls": len(loop_walls), "walls": loop_walls, "after": after,
                   "probes_at": probes_at if probes_at is not None else [len(loop_walls)] * len(after),
                   "error": ""})
    for i, wall in zip(after, after_walls):
        probe.observe({"kind": "schedule-call", "index": i, "wall_s": wall, "cpu_s": 2e-5})
    added: list = []
    measured = probe.judge(lambda *a, **k: added.append((a, k)))
    return measured, added


def test_a_loop_faster_than_the_schedule_under_load_is_cleared_by_its_probes():
    # CI of 2026-12-06: another busy process slowed every fresh call of the schedule to 2.2 ms;
    # the loop met a quiet moment (1 ms) and was slow again at its end, as were the fresh calls
    # right after it (same load)
    measured, added = _loop_probe_after([2.0e-3] * 100 + [1.0e-3] * 100 + [2.0e-3] * 100, [2.1e-3] * 8)
    assert not added and measured["loop_probe_calls"] == 8
    # the fresh calls after the loop as fast as the loop: they lower the fresh calls' fastest time
    measured, added = _loop_probe_after([1.0e-3] * 300, [1.05e-3] * 8)
    assert not added and measured["fresh_fastest_s"] == 1.05e-3


def test_a_loop_memo_still_beats_its_probes():
    measured, added = _loop_probe_after([2.2e-3] * 12 + [5e-6] * 300, [2.1e-3] * 8)
    assert [a[0] for a, _ in added] == ["GK678"]
    assert "its 8 probes, the same tensors with new contents" in added[0][1]["detail"]
    assert "took 2100 us at the fastest" in added[0][1]["detail"]


def test_a_schedule_that_ended_otherwise_judges_the_loop_as_before():
    # a trimmed schedule whose last calls are not plain fresh ones: none ran after the loop
    measured, added = _loop_probe_after([2.2e-3] * 12 + [5e-6] * 300, [])
    assert [a[0] for a, _ in added] == ["GK678"] and "loop_probe_calls" not in measured


def test_the_last_plain_fresh_calls_of_a_schedule_are_the_loops_probes():
    from gatekeeper.behaviour.timing_loop import PROBE_CALLS as AFTER_CALLS, probe_entries as _after_loop
    from gatekeeper.problem.schedule import AFTER_LOOP, MIN_CALLS, plan_schedule

    assert AFTER_CALLS == AFTER_LOOP
    for seed in range(40):
        plan = plan_schedule(seed, ["normal", "zeros"])
        for count in (len(plan.steps), 64, MIN_CALLS + AFTER_LOOP):
            steps = plan.trimmed(count).steps
            entries = [{"index": s.index, "kind": s.kind, "dist": s.dist} for s in steps]
            after = _after_loop(entries)
            # the tail is plain fresh but for the probe's own calls, which stay where they were
            kept = [s for s in steps[-AFTER_LOOP:] if s.kind != "fresh" or s.dist != "normal"]
            assert all(s.kind in ("repeat", "again") or any(r.base == s.index for r in steps) for s in kept)
            assert [e["index"] for e in after] == [s.index for s in steps[len(steps) - len(after):]]
            assert all(s.kind == "fresh" and s.dist == "normal" for s in steps[len(steps) - len(after):])
        assert [s.kind for s in plan.trimmed(MIN_CALLS).steps] == [s.kind for s in plan.steps[:MIN_CALLS]]
    assert _after_loop([{"index": 0, "kind": "fresh", "dist": "normal"}]) == []  # never the whole schedule
    assert _after_loop([{"index": 0, "kind": "fresh"}, {"index": 1, "kind": "again"}]) == []


def test_a_memo_doing_a_third_of_the_work_on_calls_under_a_millisecond_is_caught_against_the_probes():
    # red team round 6, h09, when its fresh calls ran at 0.98 ms: under a quarter is the bar for
    # the schedule's own repeats there, half for a loop that the back-to-back calls after it time
    measured, added = _loop_probe_after([9.8e-4] * 12 + [2.9e-4] * 300, [9.8e-4] * 8)
    assert [a[0] for a, _ in added] == ["GK678"]
    # an honest loop as fast as the calls after it, though twice as fast as the checked calls
    measured, added = _loop_probe_after([4.0e-4] * 300, [4.2e-4] * 8)
    assert not added


def test_the_last_call_after_the_loop_is_read_again_for_work_landing_after_return():
    # Values written into the output after its copy at return (a thread finishing the work
    # later) show as a change; an output left as returned, or one that is not a tensor, does not.
    import torch

    from gatekeeper.behaviour.timing_loop import _changed_since_return
    from gatekeeper.sandbox.tensors import pack_output

    out = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    packed = pack_output(out)
    assert not _changed_since_return(out, packed)
    out[2, 3] = -1.0
    assert _changed_since_return(out, packed)
    assert not _changed_since_return((out, out), pack_output((out, out)))


def test_a_lucky_loop_call_under_load_does_not_convict_honest_code():
    # Random-seed run of 2026-12-06 evening, two busy cores: the honest worker-thread GEMM took
    # about 1 ms with both threads on a core and 4 ms when one waited a scheduler tick. One of
    # the loop's last calls was lucky (962 us), all seven after it were not (3,879 us at best).
    loop = ([3.95e-3] * 20 + [0.962e-3]) * 9 + [3.95e-3] * 5 + [0.962e-3] + [3.95e-3] * 6
    measured, added = _loop_probe_after(loop, [3.879e-3, 3.9e-3, 4.0e-3, 3.95e-3, 3.96e-3, 3.99e-3, 4.1e-3])
    assert not added
    # Before, the fastest of the loop's last calls was compared: the same data convicted it.
    from statistics import median
    assert min(loop[-7:]) < 0.5 * 3.879e-3 and median(loop[-16:]) >= 0.5 * 3.879e-3


def test_a_memo_fast_on_most_calls_of_the_loops_end_is_still_caught():
    # a memo that misses now and then (one call in five does the work) still gains in any loop
    loop = [2.2e-3] * 12 + ([2.0e-4] * 4 + [2.2e-3]) * 60
    measured, added = _loop_probe_after(loop, [2.2e-3] * 8)
    assert [a[0] for a, _ in added] == ["GK678"]


# Probes spread over a 1,000-call loop as behaviour.schedule_checks.loop_probe_fractions draws them
# (one in each seventh, 16 calls at least apart), the last at the loop's end.
_SPREAD = [80, 230, 380, 500, 650, 800, 930, 1000]


def test_a_memo_dropped_before_the_loops_end_is_caught_by_the_probes_inside_it():
    # Armed after a streak, dropped after its 500th replay: the loop's last calls do the work.
    loop = [2.2e-3] * 12 + [5e-6] * 500 + [2.2e-3] * 488
    measured, added = _loop_probe_after(loop, [2.1e-3] * 8, _SPREAD)
    assert [a[0] for a, _ in added] == ["GK678"]
    # Judged by the loop's tail alone (probes all at the end, as before round 7) it was cleared.
    measured, added = _loop_probe_after(loop, [2.1e-3] * 8)
    assert not added and measured["cleared_by_loop_probes"]


def test_one_quiet_stretch_of_an_honest_loop_is_not_a_memo():
    # an honest loop under load: one window met a quiet moment (0.8 ms), the others and the probes did not
    loop = [2.2e-3] * 370 + [0.8e-3] * 10 + [2.2e-3] * 620
    measured, added = _loop_probe_after(loop, [2.1e-3] * 8, _SPREAD)
    assert not added and measured["cleared_by_loop_probes"]
    # nor is a loop as fast as its probes (a tight loop's warm caches are the probes' too)
    measured, added = _loop_probe_after([4.0e-4] * 1000, [4.2e-4] * 8, _SPREAD)
    assert not added


def test_probe_positions_that_make_no_sense_fall_back_to_the_loops_tail():
    loop = [2.2e-3] * 12 + [5e-6] * 988
    for bad in ([5, 3, 1000], [2000] * 8, ["x"] * 8):
        measured, added = _loop_probe_after(loop, [2.1e-3] * 8, bad)
        assert [a[0] for a, _ in added] == ["GK678"]


def test_the_loop_probes_fall_one_in_each_span_of_the_loop():
    from gatekeeper.behaviour.schedule_checks import loop_probe_fractions

    for seed in range(50):
        fractions = loop_probe_fractions(seed, 7)
        assert all(k / 7 < f < (k + 1) / 7 for k, f in enumerate(fractions))
    assert loop_probe_fractions(1, 7) == loop_probe_fractions(1, 7) != loop_probe_fractions(2, 7)
