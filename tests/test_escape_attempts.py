"""Contained is not allowed (issue 22 item 6): an attempt to reach outside the call is a
finding (GK665) even where the sandbox contained it; the same calls aimed at the worker itself
are not."""

from __future__ import annotations

from pathlib import Path

import pytest

import gatekeeper

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
PROBLEM = ROOT / "fixtures/problems/cpu_mean.py"


def _escapes(name: str) -> list[str]:
    report = gatekeeper.check(ROOT / "fixtures/submissions" / name, PROBLEM, stages="behaviour", keep_going=True)
    return [f.message for f in report.findings if f.rule == "GK665"]


def test_every_attempt_is_a_finding_though_contained():
    found = " | ".join(_escapes("cpu_escape_attempts.py"))
    assert "os.kill" in found and "signal 19" in found
    assert "ctypes.dlsym open" in found
    assert "gk_escape_probe.bin (torch from_file, shared)" in found
    assert not (ROOT / "fixtures/gk_escape_probe.bin").exists() and not (ROOT / "fixtures/submissions/gk_escape_probe.bin").exists()


def test_the_same_calls_aimed_at_itself_are_not():
    assert _escapes("cpu_contained_neighbours.py") == []
