"""Every code the source can emit is in the catalogue: listed by `gatekeeper rules`,
explained by `gatekeeper explain`, and docs/rules.md is exactly `gatekeeper rules --format
markdown`. The codes are read from the source itself (every quoted GK### in gatekeeper/ and
rules/: the run-time checks' table, the timing stage's constants, the rule classes, the
static stage's notices), so a new code that is emitted but not catalogued fails here."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gatekeeper.cli import app

ROOT = Path(__file__).resolve().parent.parent
_QUOTED_CODE = re.compile(r"""["'](GK\d{3})["']""")


def _codes_in_source() -> dict[str, set[str]]:
    """{code: the files that quote it}."""
    found: dict[str, set[str]] = {}
    for folder in ("gatekeeper", "rules"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for code in _QUOTED_CODE.findall(path.read_text("utf-8")):
                found.setdefault(code, set()).add(path.relative_to(ROOT).as_posix())
    return found


def test_the_source_scan_sees_every_kind_of_code():
    """The scan below must not pass by finding nothing: each kind of code is among its finds."""
    found = _codes_in_source()
    assert "rules/gk101_returns_persistent_tensor.py" in found["GK101"]
    assert "gatekeeper/static/no_problem.py" in found["GK006"]
    assert "gatekeeper/runtime/checks.py" in found["GK610"] & found["GK681"]
    assert "gatekeeper/timing/findings.py" in found["GK701"] & found["GK709"]
    assert len(found) > 100


@pytest.mark.slow  # `gatekeeper rules` in a subprocess, as a user runs it
def test_every_code_in_the_source_is_listed_by_gatekeeper_rules():
    proc = subprocess.run([sys.executable, "-m", "gatekeeper", "rules"], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    listed = {line.split("\t")[0] for line in proc.stdout.splitlines()}
    missing = {code: where for code, where in _codes_in_source().items() if code not in listed}
    assert not missing, f"codes the source uses but `gatekeeper rules` does not list: {missing}"


def test_every_code_in_the_source_is_explained():
    runner = CliRunner()
    for code in sorted(_codes_in_source()):
        result = runner.invoke(app, ["explain", code])
        assert result.exit_code == 0, (code, result.output)
        text = result.output
        assert text.startswith(code + " ") and "Fix:" in text and f"rules.md#{code.lower()}" in text, code


def test_docs_rules_md_is_the_generated_reference():
    result = CliRunner().invoke(app, ["rules", "--format", "markdown"])
    assert result.exit_code == 0, result.output
    current = (ROOT / "docs" / "rules.md").read_text("utf-8")
    assert current == result.output, ("docs/rules.md is stale: regenerate it with "
                                      "`gatekeeper rules --format markdown > docs/rules.md`")
