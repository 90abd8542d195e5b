"""Judging measurements: findings, the score, units in every field, text with units."""

import random
import re

import pytest

from gatekeeper.config import Config
from gatekeeper.report import Category, Severity
from gatekeeper.timing.floors import Counts, floors
from gatekeeper.timing.outputs import compare
from gatekeeper.timing.render import format_us, timing_lines
from gatekeeper.timing.score import Measured, judge
from gatekeeper.timing.specs import lookup

H200 = lookup("NVIDIA H200")
SEED = Counts(bytes_moved=15360, flops=0, flops_source="none", dtype="float32")
BIG = Counts(bytes_moved=2 << 30, flops=0, flops_source="none", dtype="float32")
CEILINGS = {"copy_gbps": 4200.0, "matmul_tflops": {"float32": 50.0}, "launch_floor_us": 2.8}


def series(center, n=200, spread=0.01, seed=0):
    rng = random.Random(seed)
    return [center * (1 + rng.uniform(-spread, spread)) for _ in range(n)]


def measured(ref_us, sub_us, escape_us=0.0, sync_cost_us=15.0):
    ref, sub = series(ref_us, seed=1), series(sub_us, seed=2)
    return Measured(ref, sub, [r + sync_cost_us for r in ref], [s + sync_cost_us + escape_us for s in sub])


def run(m, counts=SEED, launch=2.8, **timing):
    config = Config.model_validate({"timing": timing})
    return judge(m, counts, floors(counts, H200, launch), config.timing, config, ceilings=CEILINGS)


def rules(found):
    return sorted(f.rule for f in found)


def test_honest_launch_bound_pair_scores_without_findings():
    timing, score, found = run(measured(4.5, 3.6))
    assert found == []
    assert score["speedup"] == pytest.approx(1.25, rel=0.02)
    assert score["bound"] == "launch"
    assert score["sol_fraction"] < 0.01  # the roofline is nanoseconds: tiny by construction
    assert score["floor_fraction"] == pytest.approx(2.8 / 3.6, rel=0.02)
    assert "launch-bound" in score["explanation"]


def test_time_under_the_floor_is_timing_implausible():
    timing, score, found = run(measured(1000.0, 100.0), counts=BIG)  # 2 GiB cannot move in 100 µs
    assert "GK701" in rules(found)
    f = next(f for f in found if f.rule == "GK701")
    assert f.category == Category.TIMING_IMPLAUSIBLE and f.severity == Severity.ERROR
    assert f.evidence["floor_us"] == pytest.approx(timing["floors"]["floor_us"])


def test_no_kernel_under_the_launch_floor_is_flagged_unless_the_reference_launches_none():
    _, _, found = run(measured(4.5, 1.9))  # the submission launched nothing
    assert "GK701" in rules(found)
    _, _, found = run(measured(1.8, 1.9))  # a reference that is a view: no kernel needed
    assert "GK701" not in rules(found)
    # ...but only if the clean worker's reference agrees: the submission's worker may have
    # patched its reference into doing nothing.
    config = Config()
    fl = floors(SEED, H200, 2.8)
    _, _, found = judge(measured(1.8, 1.9), SEED, fl, config.timing, config, reference_alone_us=series(4.5))
    assert "GK701" in rules(found)


def test_time_just_above_the_floor_is_not_flagged():
    floor = floors(BIG, H200, 2.8).floor_us
    _, _, found = run(measured(2 * floor, 1.01 * floor), counts=BIG)
    assert "GK701" not in rules(found)


def test_extreme_speedup_asks_for_review_at_the_configured_threshold():
    _, score, found = run(measured(300.0, 20.0))
    assert score["speedup"] == pytest.approx(15, rel=0.03)
    assert rules(found) == ["GK702"] and found[0].severity == Severity.WARNING
    _, _, found = run(measured(300.0, 20.0), speedup_review=20.0)
    assert found == []


def test_work_left_on_a_side_stream_is_caught_and_charged():
    # Event time 2 µs, but 250 µs more of its work runs until the device-wide sync.
    timing, score, found = run(measured(260.0, 2.0, escape_us=250.0), counts=Counts(2 << 28, 0, "none", "float32"))
    assert "GK705" in rules(found)
    assert next(f for f in found if f.rule == "GK705").category == Category.STREAM_ESCAPE
    assert score["speedup"] < 1.2  # charged to the sync, it is no longer a 130x speedup
    assert timing["scored_basis"].startswith("device-synchronised")
    assert timing["submission"]["median_us"] == pytest.approx(2.0, rel=0.02)


def test_sync_noise_below_the_threshold_is_not_a_stream_escape():
    _, _, found = run(measured(100.0, 50.0, escape_us=3.0))
    assert "GK705" not in rules(found)


def test_reference_slowed_beside_the_submission():
    m = measured(200.0, 100.0)
    config = Config()
    fl = floors(SEED, H200, 2.8)
    _, score, found = judge(m, SEED, fl, config.timing, config, reference_alone_us=series(100.0))
    assert "GK704" in rules(found)
    # Scored against the reference it could not touch: 100/100, not the inflated 200/100.
    assert score["speedup"] == pytest.approx(1.0, rel=0.03)
    assert score["speedup_basis"].startswith("clean reference")
    assert score["speedup_ci_low"] <= score["speedup"] <= score["speedup_ci_high"]
    _, _, found = judge(m, SEED, fl, config.timing, config, reference_alone_us=series(190.0))
    assert "GK704" not in rules(found)


def test_disabled_rule_and_severity_override_are_honoured():
    config = Config.model_validate({"rules": {"GK702": {"enabled": False}, "GK701": {"severity": "warning"}}})
    fl = floors(BIG, H200, 2.8)
    _, _, found = judge(measured(3000.0, 100.0), BIG, fl, config.timing, config)
    assert rules(found) == ["GK701"] and found[0].severity == Severity.WARNING


TIME_KEY = re.compile(r"(median|iqr|ci_low|ci_high|q1|q3|min|max|floor|roofline|launch|excess|spin)")


def _walk(value, path=""):
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _walk(v, f"{path}.{k}" if path else k)
    else:
        yield path, value


def test_every_time_field_names_its_unit():
    timing, score, _ = run(measured(4.5, 3.6))
    for path, value in list(_walk(timing)) + list(_walk(score)):
        leaf = path.rsplit(".", 1)[-1]
        if isinstance(value, float) and TIME_KEY.search(leaf) and "fraction" not in leaf \
                and not leaf.startswith("speedup"):
            assert re.search(r"_(us|s|ns|ms)$", leaf), f"{path} is a time without a unit in its name"
    assert {"median_us", "iqr_us", "count", "ci_low_us", "ci_high_us"} <= set(timing["submission"])


def test_text_never_prints_a_bare_time():
    timing, score, _ = run(measured(4.5, 3.6))
    timing["device"] = "NVIDIA H200"
    text = "\n".join(timing_lines(timing, score))
    assert "µs" in text
    # Every number is followed by a unit, an x (ratio), a % or a word that names a count.
    for match in re.finditer(r"(?<![\w.])(\d+(?:\.\d+)?)(?![\d.])(\s*)(\S*)", text):
        number, _, after = match.groups()
        assert re.match(r"^(µs|ns|ms|s|x|%|calls|GB/s|TFLOP/s|B)", after) or after.startswith(("x", "%")), \
            f"bare number {number!r} before {after!r} in:\n{text}"


@pytest.mark.parametrize("us,text", [(0.0032, "3.2 ns"), (4.5, "4.5 µs"), (527.4, "527 µs"), (1020.0, "1.02 ms"),
                                     (2.5e6, "2.5 s"), (None, "n/a")])
def test_format_us_always_carries_a_unit(us, text):
    assert format_us(us) == text


@pytest.mark.slow
def test_timed_outputs_are_compared_with_the_reference():
    import torch

    from gatekeeper.sandbox.tensors import pack

    good = torch.arange(8, dtype=torch.float32)

    def msg(values, index=3, k=1):
        return {"index": index, "set": k, "tensors": [{"shape": [8], "dtype": "float32", "values": pack(values)}]}

    reference = {1: msg(good)["tensors"]}
    assert compare([msg(good + 1e-5)], reference)["mismatches"] == []
    bad = compare([msg(good + 1.0)], reference)
    assert bad["checked"] == 1 and len(bad["mismatches"]) == 1 and "timed call 3" in bad["detail"]
    assert compare([msg(good * float("nan"))], reference)["mismatches"]
    assert compare([msg(good, k=2)], reference)["mismatches"]  # no reference for that input set
    config = Config()
    _, _, found = judge(measured(4.5, 3.6), SEED, floors(SEED, H200, 2.8), config.timing, config, output_check=bad)
    assert [f.rule for f in found] == ["GK703"] and found[0].category == Category.INCORRECT


def test_float32_work_is_bounded_by_the_faster_measured_float32_rate():
    # An H100 (sixth GPU round): cuDNN ran a float32 convolution on TF32 tensor cores at ~79
    # TFLOP/s against a plain-float32 "ceiling" of 49.6, and the score said 159% of the ceilings.
    from gatekeeper.timing.floors import measured_matmul_rate

    assert measured_matmul_rate("float32", {"float32": 49.6, "tf32": 310.0}) == 310.0
    assert measured_matmul_rate("float32", {"float32": 49.6}) == 49.6  # a calibration from before
    assert measured_matmul_rate("bfloat16", {"float32": 49.6, "tf32": 310.0}) is None
    conv = Counts(bytes_moved=64 << 20, flops=int(3e11), flops_source="conv", dtype="float32")
    ceilings = {**CEILINGS, "matmul_tflops": {"float32": 49.6, "tf32": 310.0}}
    m = measured(6000.0, 3797.0)
    config = Config.model_validate({"timing": {}})
    _, score, _ = judge(m, conv, floors(conv, H200, 2.8), config.timing, config, ceilings=ceilings)
    assert 0 < score["sol_fraction_measured_ceilings"] <= 1.0
    _, old, _ = judge(m, conv, floors(conv, H200, 2.8), config.timing, config,
                      ceilings={**CEILINGS, "matmul_tflops": {"float32": 49.6}})
    assert old["sol_fraction_measured_ceilings"] > 1.0  # what the plain float32 rate said


def test_a_calibration_of_an_older_kind_is_not_read_again(tmp_path):
    from gatekeeper.timing import cache

    now = cache.key("NVIDIA H100 80GB HBM3", "580.159.04", "2.11.0+cu130")
    assert now == cache.key("NVIDIA H100 80GB HBM3", "580.159.04", "2.11.0+cu130")
    old_digest = __import__("hashlib").sha256("NVIDIA H100 80GB HBM3\0580.159.04\02.11.0+cu130".encode()).hexdigest()[:12]
    assert not now.endswith(old_digest)
