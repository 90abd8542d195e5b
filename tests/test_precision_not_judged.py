"""GK669: a run whose error budget (GK668) could not be judged says so, with the reason the
reference worker gave, instead of a silent pass on precision (the sixth GPU round found the
budget absent above 2^26 output values, with nothing in the report)."""

from __future__ import annotations

from pathlib import Path

import pytest

import gatekeeper
from gatekeeper.config import Config, RuleSettings

PROBLEM = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        {guard}
        return torch.relu(x)


def get_inputs():
    return [torch.randn(64, 128)]


def get_init_inputs():
    return []
'''
HONEST = ("import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n"
          "    def forward(self, x):\n        return x.clamp_min(0.0)\n")
# torch computes this ReLU: the torch-fallback rules are off, so what is checked is the note.
CONFIG = Config(ignore=["torch-fallback"], rules={"GK667": RuleSettings(enabled=False)})


def _check(tmp_path: Path, guard: str):
    problem = tmp_path / "relu_problem.py"
    problem.write_text(PROBLEM.format(guard=guard), "utf-8")
    problem.with_suffix(".toml").write_text('device = "cpu"\ndtype = "float32"\n', "utf-8")
    submission = tmp_path / "honest.py"
    submission.write_text(HONEST, "utf-8")
    return gatekeeper.check(submission, problem, stages="behaviour", config=CONFIG)


@pytest.mark.slow
def test_a_reference_without_a_float64_path_gets_a_note_not_a_silent_pass(tmp_path):
    report = _check(tmp_path, "assert x.dtype == torch.float32, 'float32 only'")
    assert report.verdict.value == "pass", [(f.rule, f.message) for f in report.findings]
    notes = [f for f in report.findings if f.rule == "GK669"]
    assert len(notes) == 1 and notes[0].severity.value == "info"
    assert "does not run in float64 (AssertionError: float32 only)" in notes[0].message


@pytest.mark.slow
def test_a_judged_error_budget_adds_no_note(tmp_path):
    report = _check(tmp_path, "pass")
    assert report.verdict.value == "pass", [(f.rule, f.message) for f in report.findings]
    assert "GK669" not in {f.rule for f in report.findings}
