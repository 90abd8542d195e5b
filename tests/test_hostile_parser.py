"""The hostile suite, static rows (issue 12): inputs that crashed libcst's native parser or
misplaced errors. Each runs the real `gatekeeper check` in a subprocess: a segfault would
show as exit 139, not as a failed assertion inside pytest."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # parses hostile inputs in subprocesses with limits

ROOT = Path(__file__).resolve().parents[1]
PROBLEM = ROOT / "fixtures" / "problems" / "cpu_mean.py"
HONEST = (ROOT / "fixtures" / "hostile" / "honest_python.py").read_text()


def _check(*args: str) -> tuple[int, list[dict]]:
    done = subprocess.run([sys.executable, "-m", "gatekeeper", "check", *args, "-f", "jsonl"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode in (0, 1), (done.returncode, done.stderr[-2000:])
    return done.returncode, [json.loads(line) for line in done.stdout.splitlines() if line.strip()]


def _findings(report: dict) -> list[dict]:
    return [f for f in report["findings"] if f["severity"] == "error"]


@pytest.mark.parametrize("body", [
    "X = " + " or ".join(["a"] * 8000),                      # boolean chain: libcst recursed per term
    "X = " + " and ".join(["a"] * 12000),
    "X = " + "(" * 5000 + "a" + ")" * 5000,                   # nesting CPython bounds, libcst does not
    "if a: pass\n" + "elif a: pass\n" * 15000,               # elif chain
], ids=["or-chain", "and-chain", "parentheses", "elif-chain"])
def test_row4_parser_bombs_are_a_syntax_finding_not_a_crash(tmp_path, body):
    path = tmp_path / "bomb.py"
    path.write_text(HONEST + "\n" + body + "\n")
    # --keep-going: the build's source extraction parses too.
    code, reports = _check(str(path), "-p", str(PROBLEM), "--static-only", "--keep-going")
    assert code == 1 and [f["rule"] for f in _findings(reports[0])] == ["GK003"]


def test_row4_with_jobs_every_file_gets_its_report(tmp_path):
    (tmp_path / "a_bomb.py").write_text("X = " + " or ".join(["a"] * 8000) + "\n")
    (tmp_path / "b_honest.py").write_text(HONEST)
    code, reports = _check(str(tmp_path), "-p", str(PROBLEM), "--static-only", "--jobs", "2")
    assert [Path(r["submission"]["path"]).name for r in reports] == ["a_bomb.py", "b_honest.py"]
    assert reports[0]["verdict"] == "reject" and reports[1]["verdict"] in ("pass", "reject")


def test_row9_a_huge_file_is_refused_quickly_with_a_clear_finding(tmp_path):
    path = tmp_path / "huge.py"
    path.write_text(HONEST + "x = 1\n" * 300_000)
    code, reports = _check(str(path), "-p", str(PROBLEM), "--static-only")
    finding = _findings(reports[0])[0]
    assert finding["rule"] == "GK002" and "lines" in finding["message"]


def test_row10_a_byte_order_mark_passes_static(tmp_path):
    path = tmp_path / "bom.py"
    path.write_bytes(b"\xef\xbb\xbf" + HONEST.encode())
    plain = tmp_path / "plain.py"
    plain.write_text(HONEST)
    _, with_bom = _check(str(path), "-p", str(PROBLEM), "--static-only")
    _, without = _check(str(plain), "-p", str(PROBLEM), "--static-only")
    assert [f["rule"] for f in with_bom[0]["findings"]] == [f["rule"] for f in without[0]["findings"]]


@pytest.mark.parametrize("text, line, column", [
    ("\n" * 9 + "def f(:\n    pass\n", 10, 7),                              # syntax error on line 10
    ("if True:\n" + "\n" * 9 + "        x = 1\n\tx = 2\n", 12, 1),      # TabError on line 12
])
def test_row12_syntax_errors_are_reported_where_python_places_them(tmp_path, text, line, column):
    path = tmp_path / "bad.py"
    path.write_text(text)
    _, reports = _check(str(path), "-p", str(PROBLEM), "--static-only")
    finding = _findings(reports[0])[0]
    assert finding["rule"] == "GK003"
    assert (finding["location"]["line"], finding["location"]["column"]) == (line, column)
