"""A process the submission starts while it is imported and leaves running (a helper that serves
every call from outside the worker: red team round 6, h03) is GK645; one that has ended by the
end of the import is not."""

from __future__ import annotations

from pathlib import Path

import pytest

import gatekeeper

ROOT = Path(__file__).resolve().parent.parent
PROBLEM = ROOT / "fixtures/problems/cpu_matmul_small.py"

HELPER = '''
import os, time
import torch
import torch.nn as nn

_pid = os.fork()
if _pid == 0:  # the helper: would serve GEMMs through shared memory
    time.sleep(300)
    os._exit(0)
{wait}

class ModelNew(nn.Module):
    def forward(self, a, b):
        return a @ b
'''


def _gk645(tmp_path: Path, wait: str) -> list:
    sub = tmp_path / "solution.py"
    sub.write_text(HELPER.replace("{wait}", wait).replace("time.sleep(300)", "time.sleep(300)" if not wait else "pass"),
                   "utf-8")
    report = gatekeeper.check(sub, PROBLEM, stages="behaviour", keep_going=True)
    return [f for f in report.findings if f.rule == "GK645"]


@pytest.mark.slow
def test_a_helper_process_left_running_at_import_is_found(tmp_path):
    found = _gk645(tmp_path, "")
    assert found and "started while it was imported" in found[0].message


@pytest.mark.slow
def test_a_process_that_ended_during_import_is_not(tmp_path):
    assert _gk645(tmp_path, "os.waitpid(_pid, 0)") == []
