"""`[[problem_map]]` templates (gatekeeper/problem/mapping.py, docs/configuration.md "Problem mapping"):
the `{stem}`, `{name}` and `{dir}` fields, a glob that matches several files, a field the
pattern does not capture, the first matching entry winning, an absolute template, and a
custom `submission_classes` for `--submissions-only`. Real files, real configuration loading;
the last two tests run the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gatekeeper.config import load_config
from gatekeeper.errors import UsageError
from gatekeeper.problem.mapping import map_problem

ROOT = Path(__file__).resolve().parent.parent
PROBLEM = ROOT / "fixtures" / "problems" / "seed_mean.py"
SEED = ROOT / "fixtures" / "submissions" / "seed_cached_hardcoded.py"


def _tree(tmp_path: Path, config: str, files: list[str]) -> Path:
    (tmp_path / "gatekeeper.toml").write_text(config)
    for name in files:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("# a file\n")
    return tmp_path


def _map(tmp_path: Path, submission: str) -> Path:
    found = map_problem(tmp_path / submission, load_config(search_from=tmp_path))
    assert found is not None, submission
    return found.relative_to(tmp_path) if found.is_relative_to(tmp_path) else found


def test_stem_name_and_dir_fill_the_template(tmp_path):
    config = ('[[problem_map]]\nsubmissions = "by_stem/*.py"\nproblem = "problems/{stem}.py"\n'
              '[[problem_map]]\nsubmissions = "by_name/*.py"\nproblem = "problems/named/{name}"\n'
              '[[problem_map]]\nsubmissions = "runs/**/attempt.py"\nproblem = "{dir}/reference.py"\n')
    _tree(tmp_path, config, ["problems/softmax.py", "problems/named/relu.py", "runs/level2/7/reference.py"])
    assert _map(tmp_path, "by_stem/softmax.py") == Path("problems/softmax.py")
    assert _map(tmp_path, "by_name/relu.py") == Path("problems/named/relu.py")
    assert _map(tmp_path, "runs/level2/7/attempt.py") == Path("runs/level2/7/reference.py")


def test_a_capture_named_like_a_builtin_field_wins(tmp_path):
    """README's second example captures {stem} itself; the capture, not the file's stem, fills it."""
    config = '[[problem_map]]\nsubmissions = "solutions/{stem}_v*.py"\nproblem = "problems/{stem}.py"\n'
    _tree(tmp_path, config, ["problems/softmax.py"])
    assert _map(tmp_path, "solutions/softmax_v3.py") == Path("problems/softmax.py")


def test_a_glob_matching_several_files_is_an_error_listing_them(tmp_path):
    config = '[[problem_map]]\nsubmissions = "runs/{id}_*.py"\nproblem = "KernelBench/{id}*.py"\n'
    _tree(tmp_path, config, ["KernelBench/1_Conv.py", "KernelBench/12_Mean.py", "KernelBench/19_ReLU.py",
                             "KernelBench/2_Add.py"])
    assert _map(tmp_path, "runs/2_try.py") == Path("KernelBench/2_Add.py")
    with pytest.raises(UsageError) as raised:
        _map(tmp_path, "runs/1_try.py")
    message = str(raised.value)
    assert "matches 3 files" in message and "KernelBench/1_Conv.py" in message and "KernelBench/19_ReLU.py" in message
    assert "problem_map entry 1" in message and "gatekeeper.toml" in message and "runs/1_try.py" in message
    assert "make the template specific enough" in message


def test_a_field_the_pattern_does_not_capture_is_a_configuration_error(tmp_path):
    config = '[[problem_map]]\nsubmissions = "runs/{id}_*.py"\nproblem = "KernelBench/level{level}/{id}_*.py"\n'
    _tree(tmp_path, config, ["KernelBench/level1/7_Mean.py"])
    with pytest.raises(UsageError) as raised:
        _map(tmp_path, "runs/7_try.py")
    message = str(raised.value)
    assert "problem_map entry 1" in message and "gatekeeper.toml" in message
    assert "uses {level}" in message and "does not capture" in message
    assert "{dir}, {id}, {name}, {stem}" in message  # what it may use instead
    bad = '[[problem_map]]\nsubmissions = "runs/{id}_*.py"\nproblem = "KernelBench/{id_*.py"\n'
    _tree(tmp_path, bad, [])
    with pytest.raises(UsageError, match="not a valid template"):
        _map(tmp_path, "runs/7_try.py")


def test_the_first_matching_entry_wins(tmp_path):
    config = ('[[problem_map]]\nsubmissions = "runs/special_*.py"\nproblem = "problems/special.py"\n'
              '[[problem_map]]\nsubmissions = "runs/*.py"\nproblem = "problems/general.py"\n'
              '[[problem_map]]\nsubmissions = "other/*.py"\nproblem = "problems/missing.py"\n')
    _tree(tmp_path, config, ["problems/special.py", "problems/general.py"])
    assert _map(tmp_path, "runs/special_3.py") == Path("problems/special.py")
    assert _map(tmp_path, "runs/plain.py") == Path("problems/general.py")
    assert map_problem(tmp_path / "elsewhere" / "k.py", load_config(search_from=tmp_path)) is None
    with pytest.raises(UsageError, match="problems/missing.py, which does not exist"):
        _map(tmp_path, "other/k.py")  # the matching entry's missing problem is said, not skipped


def test_an_absolute_glob_template(tmp_path):
    """A template may point outside the configuration's folder, as a glob too."""
    config = f'[[problem_map]]\nsubmissions = "runs/*.py"\nproblem = "{PROBLEM.parent.as_posix()}/seed_mea?.py"\n'
    _tree(tmp_path, config, [])
    assert _map(tmp_path, "runs/k.py") == PROBLEM


def _gk(*args, cwd: Path) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "gatekeeper", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, timeout=120)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


@pytest.mark.slow
def test_cli_says_which_field_is_not_captured(tmp_path):
    config = '[[problem_map]]\nsubmissions = "runs/*.py"\nproblem = "problems/{id}.py"\n'
    _tree(tmp_path, config, ["runs/k.py"])
    (tmp_path / "runs" / "k.py").write_text(SEED.read_text())
    proc = _gk("check", "runs/k.py", "--static-only", cwd=tmp_path)
    assert proc.returncode == 2 and "uses {id}" in proc.stderr and "does not capture" in proc.stderr


@pytest.mark.slow
def test_custom_submission_classes_choose_what_submissions_only_checks(tmp_path):
    config = (f'submission_classes = ["Solution"]\n[[problem_map]]\nsubmissions = "runs/*.py"\n'
              f'problem = "{PROBLEM.as_posix()}"\n')
    _tree(tmp_path, config, ["runs/solution.py"])
    (tmp_path / "runs" / "solution.py").write_text(SEED.read_text().replace("class ModelNew", "class Solution")
                                                   + "\nModelNew = Solution\n")
    (tmp_path / "runs" / "model_new.py").write_text(SEED.read_text())  # defines ModelNew, not Solution
    (tmp_path / "runs" / "helper.py").write_text("def helper():\n    return 1\n")
    proc = _gk("check", "runs", "--static-only", "--submissions-only", "-f", "json", cwd=tmp_path)
    reports = json.loads(proc.stdout)
    assert [r["submission"]["path"] for r in reports] == ["runs/solution.py"], proc.stdout
    assert reports[0]["problem"]["name"] == "seed_mean" and proc.returncode == 1
    (tmp_path / "runs" / "solution.py").unlink()
    none = _gk("check", "runs", "--static-only", "--submissions-only", cwd=tmp_path)
    assert none.returncode == 0 and "none defines Solution" in none.stderr
