"""`--static-only` needs only the static dependencies (libcst, pydantic, typer, pyyaml), and gives
the same findings without torch as with it (issue 21 item 1).

The problem's facts (sizes, declared shapes, fixed dimensions, dtype, entry, required names)
are read statically; importing or running the problem belongs to the stages that run code.
Checked in a fresh virtual environment with the package's base dependencies only.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as tomllib

from torchless_venv import torchless_venv  # noqa: E402 - tests/ is on sys.path under pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
CASES = ROOT.parent / "shared" / "precision-cases"


def test_base_dependencies_do_not_include_torch():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]
    names = [dep.split(";")[0].strip().lower() for dep in project["dependencies"]]
    assert not [n for n in names if n.startswith(("torch", "ninja", "numpy", "triton"))], names
    assert any(dep.lower().startswith("torch") for dep in project["optional-dependencies"]["run"])


def _pairs() -> dict[str, list[str]]:
    """Submission files by problem: every fixture case, and the precision cases when present."""
    by_problem: dict[str, list[str]] = defaultdict(list)
    for manifest in sorted((FIXTURES / "manifest").glob("*.toml")):
        for case in tomllib.loads(manifest.read_text("utf-8")).get("case", []):
            if case.get("problem") and (FIXTURES / case["submission"]).is_file():
                path = str(FIXTURES / case["submission"])
                if path not in by_problem[str(FIXTURES / case["problem"])]:
                    by_problem[str(FIXTURES / case["problem"])].append(path)
    listing = CASES / "manifest.tsv"
    if listing.is_file():
        for line in listing.read_text("utf-8").splitlines():
            parts = line.split("\t")
            if len(parts) >= 2 and not line.startswith("#") and (CASES / parts[0]).is_file():
                by_problem[str(CASES / parts[1].rstrip("/"))].append(str(CASES / parts[0]))
    return by_problem


def _arguments(problem: str, files: list[str]) -> list[str]:
    return ["check", *files, "--problem", problem, "--static-only", "-f", "json"]


def _findings(python: str, problem: str, files: list[str], cwd: Path) -> list[tuple]:
    proc = subprocess.run([python, "-m", "gatekeeper", *_arguments(problem, files)], capture_output=True, text=True,
                          cwd=cwd, timeout=600)
    assert proc.returncode in (0, 1), (python, problem, proc.stdout[-2000:], proc.stderr[-2000:])
    return _rows(proc.stdout)


def _findings_here(problem: str, files: list[str]) -> list[tuple]:
    """The same command in this process, where torch is installed (and imported): the CLI's own
    code path without a process start per problem."""
    from typer.testing import CliRunner

    from gatekeeper.cli import app

    result = CliRunner().invoke(app, _arguments(problem, files))
    assert result.exit_code in (0, 1), (problem, result.output[-2000:], result.exception)
    return _rows(result.stdout)


def _rows(stdout: str) -> list[tuple]:
    reports = json.loads(stdout)
    reports = reports if isinstance(reports, list) else [reports]
    return [(r["submission"]["path"], r["verdict"],
             sorted((f["rule"], f["severity"], (f.get("location") or {}).get("line"), f["message"])
                    for f in r["findings"])) for r in reports]


@pytest.mark.slow
def test_static_only_without_torch_gives_the_same_findings(tmp_path, monkeypatch):
    venv, why = torchless_venv()
    if venv is None:
        pytest.skip(f"no torch-less virtual environment on this machine: {why}")
    python = str(venv / "bin" / "python")
    no_torch = subprocess.run([python, "-c", "import torch"], capture_output=True, text=True)
    assert no_torch.returncode != 0 and "No module named 'torch'" in no_torch.stderr
    pairs = sorted(_pairs().items())
    # Mostly process start-up and waiting: a few at once. The side with torch runs in this
    # process (torch is imported here already), one problem after another.
    with ThreadPoolExecutor(4) as pool:
        without = list(pool.map(lambda item: _findings(python, item[0], item[1], tmp_path), pairs))
    monkeypatch.chdir(tmp_path)
    import torch  # noqa: F401 - present and loaded while the same command runs

    with_torch = [_findings_here(problem, files) for problem, files in pairs]
    for (problem, _), a, b in zip(pairs, without, with_torch):
        assert a == b, problem
    assert sum(len(files) for _, files in pairs) >= 100  # the fixture set, not a sample of it
