"""The timing stage end to end on a machine without a GPU, its config, and its cache."""

import json

import pytest

import gatekeeper
from gatekeeper.config import Config, load_config
from gatekeeper.errors import UsageError
from gatekeeper.report import StageStatus, Verdict
from gatekeeper.timing import cache
from gatekeeper.timing.findings import RULES
from gatekeeper.timing.stage import gpu_name

from pathlib import Path

FIX = Path(__file__).resolve().parent.parent / "fixtures"
needs_no_gpu = pytest.mark.skipif(gpu_name() is not None, reason="this test is about a machine without a GPU")


PLAIN_TORCH = """import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        acc = x[0].clone()
        for r in range(1, x.shape[0]):
            acc = acc + x[r]
        return acc / x.shape[0]
"""


@pytest.mark.slow
@needs_no_gpu
def test_time_without_a_gpu_is_an_infrastructure_error_after_the_earlier_stages():
    # Plain torch passes build and behaviour on a CPU machine once the torch-op rule and the
    # run-time work attribution are off, so the run reaches the timing stage, which must refuse.
    config = Config.model_validate({"rules": {"GK304": {"enabled": False}, "GK667": {"enabled": False}}})
    report = gatekeeper.check(PLAIN_TORCH, FIX / "problems/seed_mean.py", time=True, config=config)
    stages = {s.name.value: s for s in report.stages}
    assert stages["static"].status == StageStatus.PASSED
    assert stages["behaviour"].status == StageStatus.PASSED
    assert stages["timing"].status == StageStatus.ERROR
    assert "needs a CUDA GPU" in stages["timing"].reason and "no CPU time" in stages["timing"].reason
    assert report.verdict == Verdict.ERROR and report.exit_code == 3
    assert "GPU" in report.error
    assert report.timing is None and report.score is None  # never a CPU figure


@needs_no_gpu
def test_run_timing_refuses_without_a_gpu_before_anything_else():
    from gatekeeper.pipeline import RunOptions, Submission
    from gatekeeper.timing.stage import run_timing

    out = run_timing(Submission("x.py", b""), None, Config(), RunOptions(time=True), [])
    assert out.status == StageStatus.ERROR and "needs a CUDA GPU" in out.reason
    assert out.report == {}


@needs_no_gpu
def test_the_seed_submission_is_rejected_before_timing():
    report = gatekeeper.check(FIX / "submissions/seed_cached_hardcoded.py", FIX / "problems/seed_mean.py", time=True)
    assert report.verdict == Verdict.REJECT and report.exit_code == 1
    timing = next(s for s in report.stages if s.name.value == "timing")
    assert timing.status == StageStatus.SKIPPED
    assert report.timing is None


def test_timing_settings_are_validated():
    assert Config().timing.l2_flush_factor >= 2.0
    with pytest.raises(Exception):
        Config.model_validate({"timing": {"l2_flush_factor": 1.0}})
    with pytest.raises(Exception):
        Config.model_validate({"timing": {"no_such_knob": 1}})


def test_timing_settings_from_toml(tmp_path):
    (tmp_path / "gatekeeper.toml").write_text("[timing]\nmode = 'graph'\nspeedup_review = 4.0\n")
    config = load_config(search_from=tmp_path)
    assert config.timing.mode == "graph" and config.timing.speedup_review == 4.0
    (tmp_path / "gatekeeper.toml").write_text("[timing]\nmode = 'cpu'\n")
    with pytest.raises(UsageError):
        load_config(search_from=tmp_path)


def test_rule_codes_are_unique_and_in_the_timing_range():
    codes = [r.code for r in RULES]
    assert len(codes) == len(set(codes))
    assert all(c.startswith("GK7") and len(c) == 5 for c in codes)
    assert all(r.message and r.hint and r.name for r in RULES)


def test_calibration_cache_round_trip(tmp_path):
    key = cache.key("NVIDIA H200", "580.159.04", "2.11.0+cu130")
    assert key == cache.key("NVIDIA H200", "580.159.04", "2.11.0+cu130")
    assert key != cache.key("NVIDIA H200", "580.159.05", "2.11.0+cu130")
    assert cache.load(tmp_path, key) is None
    assert cache.store(tmp_path, key, {"launch_floor_us": 2.8}) is not None
    assert cache.load(tmp_path, key)["launch_floor_us"] == 2.8
    (tmp_path / f"{key}.json").write_text("{broken")
    assert cache.load(tmp_path, key) is None
    (tmp_path / f"{key}.json").write_text(json.dumps({"key": "other"}))
    assert cache.load(tmp_path, key) is None


def test_gpu_specs_command_lists_and_matches():
    from typer.testing import CliRunner

    from gatekeeper.cli import app

    runner = CliRunner()
    listed = runner.invoke(app, ["gpu-specs"])
    assert listed.exit_code == 0 and "H100 PCIe" in listed.output and "GB/s" in listed.output
    one = runner.invoke(app, ["gpu-specs", "NVIDIA A100-SXM4-80GB", "--json"])
    assert one.exit_code == 0 and json.loads(one.output)[0]["bandwidth_gbps"] == 2039
    assert runner.invoke(app, ["gpu-specs", "No Such GPU"]).exit_code == 2
