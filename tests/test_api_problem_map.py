"""`gatekeeper.check(path)` with no problem applies the configuration's `[[problem_map]]`,
as the CLI's `check`, the pre-commit hook and ingest do; source text, which has no path,
says it has no problem with GK006. Real files, a real configuration, the real static stage."""

from __future__ import annotations

from pathlib import Path

import pytest

import gatekeeper
from gatekeeper.config import load_config
from gatekeeper.errors import UsageError

ROOT = Path(__file__).resolve().parent.parent
SEED = ROOT / "fixtures" / "submissions" / "seed_cached_hardcoded.py"
PROBLEM = ROOT / "fixtures" / "problems" / "seed_mean.py"


def _kernelbench_tree(tmp_path: Path) -> Path:
    (tmp_path / "KernelBench" / "level1").mkdir(parents=True)
    (tmp_path / "KernelBench" / "level1" / "7_seed_mean.py").write_text(PROBLEM.read_text())
    (tmp_path / "runs" / "level1").mkdir(parents=True)
    (tmp_path / "runs" / "level1" / "7_attempt.py").write_text(SEED.read_text())
    (tmp_path / "runs" / "level1" / "9_attempt.py").write_text(SEED.read_text())
    (tmp_path / "gatekeeper.toml").write_text(
        '[[problem_map]]\nsubmissions = "runs/level{level}/{id}_*.py"\nproblem = "KernelBench/level{level}/{id}_*.py"\n')
    return tmp_path


def _rules(report) -> set[str]:
    return {f.rule for f in report.findings}


@pytest.mark.slow  # check(stages="static") imports the mapped problem in a sandboxed worker
def test_a_path_without_a_problem_gets_the_mapped_one(tmp_path):
    tree = _kernelbench_tree(tmp_path)
    submission = tree / "runs" / "level1" / "7_attempt.py"
    for report in (gatekeeper.check_static(submission), gatekeeper.check(str(submission), stages="static")):
        assert report.problem is not None and report.problem.name == "7_seed_mean"
        assert "GK006" not in _rules(report) and "GK203" in _rules(report)  # GK203 needs the problem's sizes
    given = gatekeeper.check_static(submission, problem=PROBLEM)  # a problem given is used as it is
    assert given.problem.name == "seed_mean"
    explicit = gatekeeper.check_static(submission, config=load_config(search_from=tree))
    assert explicit.problem.name == "7_seed_mean"  # also with a Config object


def test_a_mapped_problem_that_is_missing_is_a_usage_error(tmp_path):
    tree = _kernelbench_tree(tmp_path)
    with pytest.raises(UsageError, match="matches no file"):
        gatekeeper.check_static(tree / "runs" / "level1" / "9_attempt.py")


def test_source_text_and_unmapped_paths_say_gk006(tmp_path):
    tree = _kernelbench_tree(tmp_path)
    text = gatekeeper.check_static(SEED.read_text())
    outside = tree / "elsewhere.py"
    outside.write_text(SEED.read_text())
    for report in (text, gatekeeper.check_static(outside), gatekeeper.check(SEED.read_text(), stages="static")):
        assert report.problem is None
        notice = [f for f in report.findings if f.rule == "GK006"]
        assert notice and notice[0].severity.value == "warning"
