"""Fail closed and refuse early (issue 21, items 4 and 9): a stage that --select/--ignore
leave without a code is skipped as deselected, never run and reported passed; a selection
that leaves nothing to run says so; --time without a GPU and contradictory flags are refused
before any file is checked. Real subprocesses, the real configuration and catalogue."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gatekeeper.config import load_config
from gatekeeper.report import StageName

ROOT = Path(__file__).resolve().parent.parent
PROBLEM = ROOT / "fixtures" / "problems" / "cpu_mean.py"
HONEST = ROOT / "fixtures" / "submissions" / "cpu_honest_python.py"


def gk(*args, env=None, cwd=None) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "gatekeeper", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd or ROOT, timeout=300, env={**os.environ, **(env or {})})
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def _wrong(tmp_path: Path) -> Path:
    """A plain-Python kernel with the wrong formula (sum, not mean): static rules see nothing."""
    path = tmp_path / "wrong.py"
    path.write_text(HONEST.read_text().replace("return total / x.shape[0]", "return total"))
    return path


# The plain-Python kernel is a torch fallback (GK304) by design; set that aside to see the stages.
PLAIN = ("--ignore", "torch-fallback")


def _stages(proc: subprocess.CompletedProcess) -> dict[str, dict]:
    return {s["name"]: s for s in json.loads(proc.stdout)["stages"]}


@pytest.mark.parametrize("selection, idle", [
    ({"select": ["GK1"]}, {"build", "behaviour", "timing"}),
    ({"ignore": ["behaviour"]}, {"behaviour"}),
    ({"select": ["GK6"]}, {"static", "timing"}),  # GK68x are build codes: build stays, static goes
    ({"select": ["GK7"]}, {"static", "behaviour"}),  # timing needs the build stage's extensions
    ({}, set()),
])
def test_idle_stages_follow_the_catalogue(selection, idle):
    config = load_config(overrides=selection)
    assert {s.value for s in config.idle_stages()} == idle


def test_disabled_rules_count_like_ignored_ones(tmp_path):
    from gatekeeper.catalogue import catalogue

    timing = [code for code, e in catalogue().items() if e.stage == StageName.TIMING]
    (tmp_path / "gatekeeper.toml").write_text("".join(f"[rules.{c}]\nenabled = false\n" for c in timing))
    assert load_config(config_file=tmp_path / "gatekeeper.toml").idle_stages() == {StageName.TIMING}


@pytest.mark.slow
@pytest.mark.parametrize("flags, skipped", [
    (("--ignore", "behaviour"), {"behaviour"}),
    (("--select", "GK1,GK3"), {"build", "behaviour"}),
])
def test_a_deselected_stage_is_skipped_not_run_and_never_passed(tmp_path, flags, skipped):
    proc = gk("check", _wrong(tmp_path), "-p", PROBLEM, "-f", "json", *PLAIN, *flags)
    stages = _stages(proc)
    for name in skipped:
        assert stages[name]["status"] == "skipped", stages[name]
        assert stages[name]["reason"].startswith("deselected"), stages[name]
        assert not stages[name].get("duration_s")  # not run, so no time spent in it
    text = gk("check", _wrong(tmp_path), "-p", PROBLEM, *PLAIN, *flags).stdout
    for name in skipped:
        assert f"{name}: skipped (deselected" in text and f"{name}: passed" not in text


@pytest.mark.slow
def test_the_wrong_kernel_is_rejected_when_behaviour_runs(tmp_path):
    """The near miss of the test above: nothing deselected, the same kernel is caught (GK601)."""
    proc = gk("check", _wrong(tmp_path), "-p", PROBLEM, "-f", "json", *PLAIN)
    report = json.loads(proc.stdout)
    assert proc.returncode == 1 and "GK601" in {f["rule"] for f in report["findings"]}
    assert _stages(proc)["behaviour"]["status"] == "failed"


@pytest.mark.slow
def test_a_selection_that_leaves_nothing_warns(tmp_path):
    proc = gk("check", HONEST, "-p", PROBLEM, "--static-only", "--select", "GK6")
    said = " ".join(proc.stderr.split())
    assert proc.returncode == 0 and "warning:" in said and "nothing is checked" in said
    assert "nothing is checked" not in gk("check", HONEST, "-p", PROBLEM, "--static-only", "--select", "GK1").stderr


@pytest.mark.slow
def test_time_without_a_gpu_is_refused_before_any_work():
    # GATEKEEPER_ASSUME_CUDA=0 stands for a machine without a GPU, whatever this one has.
    proc = gk("check", HONEST, "-p", PROBLEM, "--time", "-f", "json", env={"GATEKEEPER_ASSUME_CUDA": "0"})
    said = " ".join(proc.stderr.split())
    assert proc.returncode == 3 and proc.stdout == ""  # no report: nothing was checked
    assert "--time needs a CUDA GPU" in said and "nothing was built or run" in said and "drop --time" in said
    hidden = gk("check", HONEST, "-p", PROBLEM, "--time", env={"CUDA_VISIBLE_DEVICES": "", "GATEKEEPER_ASSUME_CUDA": ""})
    assert hidden.returncode == 3 and "CUDA_VISIBLE_DEVICES" in hidden.stderr


@pytest.mark.slow
@pytest.mark.parametrize("flags, words", [
    (("--static-only", "--time"), "--static-only runs no code"),
    (("-q", "-v"), "--quiet prints one line"),
])
def test_contradictory_flags_are_a_usage_error(flags, words):
    proc = gk("check", "no/such/file.py", *flags)  # refused before the path is even looked at
    assert proc.returncode == 2 and "Usage:" in proc.stderr and words in proc.stderr
    assert "no such file" not in proc.stderr


@pytest.mark.slow
def test_a_flag_takes_no_value_and_help_does_not_say_it_does():
    help_text = gk("check", "--help").stdout
    assert "<bool>" not in help_text and "--static-only" in help_text
    proc = gk("check", HONEST, "-p", PROBLEM, "--static-only", "true")  # "true" is a path, not a value
    assert proc.returncode == 2 and "true" in proc.stderr
