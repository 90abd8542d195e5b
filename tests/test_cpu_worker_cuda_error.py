"""A CUDA error in the worker of a problem run on the CPU is the submission's runtime failure
(GK660) that says why, not "went over the memory limit" (GK663): on an H100 (2026-12-05) a
Triton kernel checked against a CPU-pinned problem failed with "CUDA error: out of memory",
because CUDA cannot start under the CPU worker's memory cap. A real MemoryError stays GK663."""

from __future__ import annotations

from pathlib import Path

import pytest

import gatekeeper

ROOT = Path(__file__).resolve().parent.parent
PROBLEM = ROOT / "fixtures" / "problems" / "cpu_mean.py"
SOURCE = '''import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        raise {error}
'''


def _errors(tmp_path: Path, error: str) -> dict[str, str]:
    path = tmp_path / "sub.py"
    path.write_text(SOURCE.format(error=error), "utf-8")
    report = gatekeeper.check(path, PROBLEM, stages="behaviour", keep_going=True)
    assert report.verdict.value == "reject", report.error
    return {f.rule: f.message for f in report.findings if f.severity.value == "error"}


@pytest.mark.slow
def test_a_cuda_error_on_a_cpu_problem_says_the_problem_runs_on_the_cpu(tmp_path):
    found = _errors(tmp_path, 'RuntimeError("CUDA error: out of memory")')
    assert "GK663" not in found, found
    assert "GK660" in found and "this problem runs on the CPU" in found["GK660"], found


@pytest.mark.slow
def test_a_memory_error_is_still_over_the_memory_limit(tmp_path):
    found = _errors(tmp_path, 'MemoryError("out of memory")')
    assert "GK663" in found and "runs on the CPU" not in found["GK663"], found
