"""The reference worker reuses a transfer file's digest as the input's digest before the call,
and tells all-zeros from constant outputs in one pass (issue 21 item 12): what it reports
must be what it reported when it hashed every input twice and scanned outputs twice."""

from __future__ import annotations

from pathlib import Path

import pytest

from gatekeeper.behaviour.reference_job import _describe_output, run_attempt
from gatekeeper.config import Config
from gatekeeper.problem.loaded import load_problem
from gatekeeper.problem.plan import plan_trials
from gatekeeper.problem.secret import init_seed
from gatekeeper.sandbox.spill import BYTES_ENV, DIR_ENV

PROBLEM = '''import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x, y):
        return {body}

def get_inputs():
    return [torch.randn(4096), torch.randn(64)]

def get_init_inputs():
    return []
'''


def _nominal(tmp_path: Path, body: str, spill_bytes: int, monkeypatch) -> dict:
    path = tmp_path / "problem.py"
    path.write_text(PROBLEM.format(body=body), "utf-8")
    folder = tmp_path / "xfer"
    folder.mkdir()
    monkeypatch.setenv(DIR_ENV, str(folder))
    monkeypatch.setenv(BYTES_ENV, str(spill_bytes))
    problem, config = load_problem(path), Config()
    trials, _ = plan_trials(problem.source, problem.sidecar, 7, config.jitter.shapes, config.jitter.low,
                            config.jitter.high, canonical=problem.shapes)
    trial = trials[0].to_json(init_seed=init_seed(7))
    return run_attempt(str(path), trial["attempts"][0], trial, list(config.jitter.names), "cpu", 0)


@pytest.mark.parametrize("spill_bytes", [1024, 1 << 30])  # x as a transfer file (y inline), and all inline
@pytest.mark.parametrize("body,mutated", [("x.relu_() + y.sum()", [0]), ("x + y.add_(1).sum()", [1]),
                                          ("x.relu() + y.sum()", [])])
def test_inputs_mutated_by_the_reference_are_reported(tmp_path, monkeypatch, spill_bytes, body, mutated):
    result = _nominal(tmp_path, body, spill_bytes, monkeypatch)
    assert ("file" in result["inputs"][0]) == (spill_bytes == 1024) and "data" in result["inputs"][1]
    assert result["mutated"] == mutated


@pytest.mark.parametrize("values,constant,zeros", [
    ([0.0, 0.0, -0.0], True, True), ([2.0, 2.0, 2.0], True, False), ([0.0, 1.0, 0.0], False, False),
    ([0.0], False, True), ([3.0], False, False), ([float("nan"), float("nan")], False, False), ([], False, False),
    # longer than the head that is looked at first: the value that differs comes after it
    ([1.0] * 5000 + [2.0], False, False), ([0.0] * 9000, True, True), ([5.0] * 9000, True, False),
])
def test_constant_and_all_zero_outputs_are_told_apart(values, constant, zeros):
    import torch

    info = _describe_output(torch.tensor(values))
    assert (info["constant"], info["zeros"]) == (constant, zeros)
