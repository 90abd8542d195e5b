"""A full disk is the checker's problem (issue 11 item 5, found on the H200: level-1
problems with multi-GiB outputs filled a 64 GB disk, and one submission was rejected for the
OSError it saw). Large problems are judged by inputs and output together, a trial that would
not fit the free disk is skipped and said, and ENOSPC is an infrastructure error: from the
gatekeeper's own processes always, from the submission's only when the disk is short."""

import errno
import os
import shutil
import tempfile

import pytest

import gatekeeper
from gatekeeper.behaviour.reference_job import disk_shortfall
from gatekeeper.config import Config, RuleSettings
from gatekeeper.runtime.disk import disk_full_reason, is_disk_full, mentions_disk_full
from gatekeeper.sandbox.spill import BYTES_ENV, DIR_ENV

# 16 KiB of inputs, 24 MiB of output: over 16 x the 1 MiB threshold only by its output.
OUTER = '''
import torch
import torch.nn as nn
rows = 4096
cols = 1536
class Model(nn.Module):
    def forward(self, a, b):
        return torch.outer(a, b)
def get_inputs():
    return [torch.randn(rows), torch.randn(cols)]
def get_init_inputs():
    return []
'''
WRONG_OUTER = ("import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, a, b):\n"
               "        return torch.outer(a, b) * 1.5\n")
FULL_DISK = ("import errno, os, torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, a, b):\n"
             "        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))\n")
NO_WORK_RULE = Config(rules={"GK667": RuleSettings(enabled=False)})


def _problem(tmp_path):
    problem = tmp_path / "outer.py"
    problem.write_text(OUTER)
    (tmp_path / "outer.toml").write_text('device = "cpu"\n')
    return problem


def _check(tmp_path, source):
    path = tmp_path / "sub.py"
    path.write_text(source)
    report = gatekeeper.check(path, _problem(tmp_path), stages="behaviour", keep_going=True, config=NO_WORK_RULE)
    return report, next(s for s in report.stages if s.name.value == "behaviour")


@pytest.mark.slow
def test_a_problem_large_by_its_output_alone_is_jittered_down_only(tmp_path, monkeypatch):
    monkeypatch.setenv(BYTES_ENV, str(1 << 20))
    report, _ = _check(tmp_path, WRONG_OUTER)
    wrong = next(f for f in report.findings if f.rule == "GK601")
    shapes = wrong.evidence["trial_shapes"]
    nominal = shapes["nominal"][0][0] * shapes["nominal"][1][0]
    jittered = {n: s[0][0] * s[1][0] for n, s in shapes.items() if n.startswith("jitter") and s}
    assert jittered and all(size <= nominal for size in jittered.values()), shapes


@pytest.mark.slow
def test_a_submission_cannot_turn_its_reject_into_an_error_by_raising_enospc(tmp_path):
    # Its process is untrusted: with the disk nowhere near full, the raise is its own failure.
    report, stage = _check(tmp_path, FULL_DISK)
    assert stage.status.value == "failed", (stage.status, stage.reason)
    assert report.verdict.value == "reject"
    assert "GK660" in {f.rule for f in report.findings}


def test_enospc_from_the_submissions_worker_counts_when_the_disk_is_short():
    from gatekeeper.behaviour.stage import _believable_disk_full
    from gatekeeper.sandbox.runner import JobResult

    said = JobResult("ok", messages=[{"kind": "error", "message": "[Errno 28] No space left on device"}])
    free = shutil.disk_usage(tempfile.gettempdir()).free
    assert _believable_disk_full(said, {"nominal": {"held_bytes": free}})  # twice it cannot fit
    assert not _believable_disk_full(said, {"nominal": {"held_bytes": 1 << 20}})
    quiet = JobResult("ok", messages=[{"kind": "error", "message": "RuntimeError: bad shape"}])
    assert not _believable_disk_full(quiet, {"nominal": {"held_bytes": free}})


def test_a_trial_that_does_not_fit_the_free_disk_is_skipped_with_its_numbers(tmp_path, monkeypatch):
    monkeypatch.setenv(DIR_ENV, str(tmp_path))
    monkeypatch.setenv(BYTES_ENV, str(1 << 20))
    free = shutil.disk_usage(tmp_path).free
    why = disk_shortfall(free)  # twice the free space plus the reserve can never fit
    assert why is not None and "not enough disk" in why and str(tmp_path) in why
    assert mentions_disk_full([why])
    assert disk_shortfall(1 << 20) is None  # 4 GiB and more free on any machine that runs this
    assert disk_shortfall(1024) is None  # under the threshold: travels inline, no file at all


def test_without_a_transfer_folder_nothing_is_skipped(monkeypatch):
    monkeypatch.delenv(DIR_ENV, raising=False)
    assert disk_shortfall(1 << 50) is None


def test_disk_full_is_recognised_from_the_exception_and_from_worker_text(tmp_path):
    assert is_disk_full(OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)))
    assert is_disk_full(OSError(errno.EDQUOT, os.strerror(errno.EDQUOT)))
    assert not is_disk_full(OSError(errno.ENOENT, "missing"))
    assert not is_disk_full(ValueError("No space left on device"))
    assert mentions_disk_full(["OSError: [Errno 28] No space left on device"])
    assert not mentions_disk_full(["RuntimeError: shape mismatch"])
    reason = disk_full_reason("testing", str(tmp_path))
    assert reason.startswith("infrastructure error") and str(tmp_path) in reason and "GiB free" in reason
