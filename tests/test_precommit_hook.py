"""The published pre-commit hook: its YAML has the structure pre-commit reads, and its entry,
run the way pre-commit runs it (entry + args + file names), gives the right exit codes."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # runs the hook in git repositories

ROOT = Path(__file__).resolve().parent.parent
HOOKS_FILE = ROOT / ".pre-commit-hooks.yaml"
FIXTURES = ROOT / "fixtures"
HACKED = FIXTURES / "submissions/seed_cached_hardcoded.py"
HONEST = FIXTURES / "submissions/seed_honest_generic.py"
PROBLEM = FIXTURES / "problems/seed_mean.py"
# Keys pre-commit accepts in a hook definition (a typo in any other key breaks installs).
KNOWN_KEYS = {
    "id", "name", "entry", "language", "files", "exclude", "types", "types_or", "exclude_types",
    "always_run", "fail_fast", "verbose", "pass_filenames", "require_serial", "description",
    "language_version", "minimum_pre_commit_version", "args", "stages", "additional_dependencies",
    "log_file",
}


def _hooks() -> list[dict]:
    yaml = pytest.importorskip("yaml")  # pyyaml comes with libcst
    data = yaml.safe_load(HOOKS_FILE.read_text("utf-8"))
    assert isinstance(data, list) and data, "the file must be a YAML list of hook mappings"
    return data


def _hook(hook_id: str) -> dict:
    found = [h for h in _hooks() if h.get("id") == hook_id]
    assert len(found) == 1, f"expected exactly one {hook_id!r} hook"
    return found[0]


def test_hooks_file_structure():
    ids = [h["id"] for h in _hooks()]
    assert len(ids) == len(set(ids)), "hook ids must be unique"
    for hook in _hooks():
        assert {"id", "name", "entry", "language"} <= set(hook), hook
        assert set(hook) <= KNOWN_KEYS, set(hook) - KNOWN_KEYS


def test_gatekeeper_static_hook_definition():
    hook = _hook("gatekeeper-static")
    assert hook["language"] == "python"
    assert hook["pass_filenames"] is True
    assert shlex.split(hook["entry"]) == ["gatekeeper", "check", "--static-only", "--submissions-only"]
    files = re.compile(hook["files"])
    assert files.search("solutions/kernel.py") and files.search("a.py")
    assert not files.search("kernel.pyc") and not files.search("kernel.cu") and not files.search("notes.py.txt")


def _run_entry(*args: str) -> subprocess.CompletedProcess:
    """Run the hook the way pre-commit does: entry, then args, then the staged file names."""
    entry = shlex.split(_hook("gatekeeper-static")["entry"])
    # The console script installed next to this interpreter (pre-commit installs it likewise).
    script = Path(sys.executable).parent / entry[0]
    command = [str(script) if script.exists() else shutil.which(entry[0]) or entry[0], *entry[1:], *args]
    return subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=120)


def test_entry_rejects_the_hacked_seed_with_exit_1():
    done = _run_entry("--problem", str(PROBLEM), str(HACKED))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "GK101" in done.stdout and "REJECT" in done.stdout


def test_entry_passes_the_honest_kernel_with_exit_0():
    done = _run_entry("--problem", str(PROBLEM), str(HONEST))
    assert done.returncode == 0, done.stdout + done.stderr


def test_entry_with_several_files_fails_if_any_is_rejected():
    done = _run_entry("--problem", str(PROBLEM), str(HONEST), str(HACKED))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "PASS" in done.stdout and "REJECT" in done.stdout


def test_entry_without_problem_fails_closed_and_still_shows_the_cached_output():
    """Without its problem a submission is never passed (issue 21 item 4): the hook fails
    (exit 3, saying how to map the problem), and still shows what the rules found: the
    persistent output, held for its run-time check GK610."""
    done = _run_entry(str(HACKED))
    assert done.returncode == 3 and "GK101" in done.stdout, done.stdout + done.stderr
    assert "problem" in done.stdout + done.stderr


def test_entry_usage_error_is_exit_2_without_traceback():
    done = _run_entry("--problem", "no/such/problem.py", str(HONEST))
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and "problem" in done.stderr


def test_entry_skips_problem_files_and_helpers_and_maps_problems(tmp_path):
    """A KernelBench-like repository: the hook gets every staged .py file; only the
    submissions are checked, each against the problem its problem_map entry names."""
    (tmp_path / "problems" / "level1").mkdir(parents=True)
    (tmp_path / "problems" / "level1" / "1_seed_mean.py").write_text(PROBLEM.read_text())
    (tmp_path / "solutions" / "level1").mkdir(parents=True)
    hacked = tmp_path / "solutions" / "level1" / "1_try.py"
    hacked.write_text(HACKED.read_text())
    helper = tmp_path / "solutions" / "helpers.py"
    helper.write_text("def clamp(x, lo, hi):\n    return max(lo, min(x, hi))\n")
    (tmp_path / "gatekeeper.toml").write_text(
        '[[problem_map]]\nsubmissions = "solutions/level{n}/{id}_*.py"\nproblem = "problems/level{n}/{id}_*.py"\n')
    entry = shlex.split(_hook("gatekeeper-static")["entry"])
    script = Path(sys.executable).parent / entry[0]
    command = [str(script) if script.exists() else entry[0], *entry[1:], "--format", "json"]
    files = [str(tmp_path / "problems/level1/1_seed_mean.py"), str(helper), str(hacked)]
    proc = subprocess.run([*command, *files], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert proc.returncode == 1, proc.stderr
    import json

    reports = json.loads(proc.stdout)
    assert [Path(r["submission"]["path"]).name for r in reports] == ["1_try.py"]
    assert reports[0]["problem"]["name"] == "1_seed_mean"
    assert "GK203" in {f["rule"] for f in reports[0]["findings"]}  # a rule that needs the problem ran
    only_helpers = subprocess.run([*command, str(helper)], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert only_helpers.returncode == 0 and "nothing to check" not in only_helpers.stdout


def test_pre_commit_runs_the_published_hook_without_torch(tmp_path):
    """Issue 21 item 1: pre-commit installs the hook into its own environment (the package's
    base dependencies, no torch); `--static-only` must work there. A real `pre-commit
    try-repo` of this checkout, run by a pre-commit that lives in a torch-less venv."""
    from torchless_venv import torchless_venv  # noqa: E402 - tests/ is on sys.path under pytest

    venv, why = torchless_venv()
    if venv is None:
        pytest.skip(f"no torch-less virtual environment on this machine: {why}")
    repo = tmp_path / "agent"
    (repo / "problems").mkdir(parents=True)
    (repo / "subs").mkdir()
    (repo / "problems" / "seed_mean.py").write_text(PROBLEM.read_text())
    (repo / "subs" / "hacked.py").write_text(HACKED.read_text())
    (repo / "subs" / "honest.py").write_text(HONEST.read_text())
    (repo / "gatekeeper.toml").write_text('[[problem_map]]\nsubmissions = "subs/*.py"\nproblem = "problems/seed_mean.py"\n')
    git = ["git", "-c", "user.email=t@example.com", "-c", "user.name=t"]
    for command in (["init", "-q"], ["add", "."], ["commit", "-qm", "agent work"]):
        subprocess.run([*git, *command], cwd=repo, check=True, capture_output=True)
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home"), "PYTHONPATH": ""}
    env.pop("VIRTUAL_ENV", None)

    def pre_commit(*files: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(venv / "bin" / "pre-commit"), "try-repo", str(ROOT), "gatekeeper-static",
                               "--verbose", "--files", *files], cwd=repo, env=env, capture_output=True, text=True,
                              timeout=900)

    both = pre_commit("subs/hacked.py", "subs/honest.py", "problems/seed_mean.py")
    out = both.stdout + both.stderr
    assert "No module named" not in out and "problem error" not in out, out[-3000:]
    assert both.returncode == 1, out[-3000:]
    assert "REJECT subs/hacked.py" in out and "PASS subs/honest.py" in out and "GK101" in out
    assert "seed_mean.py profile=" not in out  # --submissions-only: the problem file is not a submission
    assert "1 pass, 1 reject, 0 error" in out  # each try-repo installs the hook afresh (a minute): one run
