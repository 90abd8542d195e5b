"""A large input the reference worker made is handed on to the submission's worker by a
rename of its transfer file, not a copy (sandbox/spill.py, sandbox/held_files.py): the file
the second worker reads is the very file the parent adopted and checked, the parent keeps no
name of it afterwards, and a file the parent has mapped is copied instead, so that nothing
the parent still reads can change. Real workers; the threshold is lowered to 1 MiB."""

from __future__ import annotations

import os

import pytest
import torch

from gatekeeper.sandbox import run_job
from gatekeeper.sandbox.runner import Job
from gatekeeper.sandbox.spill import BYTES_ENV, FileData

pytestmark = pytest.mark.slow
TIMEOUTS = {"import": 60, "call": 60, "wait": 60}
MAKE = ("import torch\nfrom gatekeeper.sandbox.tensors import pack\ntorch.manual_seed(3)\n"
        "result = pack(torch.randn(1024, 1024))\n")


@pytest.fixture(autouse=True)
def low_threshold(monkeypatch):
    monkeypatch.setenv(BYTES_ENV, str(1 << 20))


def _adopted() -> dict:
    result = run_job("gatekeeper.sandbox.selftest:run_code", {"code": MAKE}, timeouts=TIMEOUTS,
                     default_timeout_s=60)
    assert result.status == "ok", result
    packed = result.first("result")["value"]
    assert isinstance(packed["data"], FileData)
    return packed


def _hand_on(packed: dict, overwrite: bool = False) -> dict:
    job = Job("gatekeeper.sandbox.selftest:receive_tensor", {"overwrite": overwrite}, timeouts=TIMEOUTS,
              default_timeout_s=60, keep_stdin=True)
    job.feed({"t": packed})
    result = job.wait()
    assert result.status == "ok", result
    return result.first("got")


def test_an_adopted_input_is_handed_on_as_the_same_file():
    packed = _adopted()
    data = packed["data"]
    inode, held = os.fstat(data.fd).st_ino, data.held
    assert held is not None and os.path.exists(held)
    assert os.stat(held).st_nlink == 1  # the worker's folder keeps no name of it
    got = _hand_on(packed)
    torch.manual_seed(3)
    assert got["total"] == pytest.approx(float(torch.randn(1024, 1024).double().sum()))
    assert got["inode"] == inode  # moved, not copied
    assert data.fd == -1 and data.held is None and not os.path.exists(held)  # the parent let go of it


def test_a_file_the_parent_has_mapped_is_copied_and_stays_as_it_was():
    packed = _adopted()
    data = packed["data"]
    inode = os.fstat(data.fd).st_ino
    # The parent maps it and keeps a view whose buffer outlives the release (the mapping stays).
    view = memoryview(data.buffer())
    before = bytes(view[:4096]), bytes(view[-4096:])
    got = _hand_on(packed, overwrite=True)
    assert got["inode"] != inode  # a copy of its own for the worker
    torch.manual_seed(3)
    assert got["total"] == pytest.approx(float(torch.randn(1024, 1024).double().sum()))
    # The worker wrote zeros over its file afterwards: what the parent still reads is unchanged.
    assert (bytes(view[:4096]), bytes(view[-4096:])) == before and any(before[0])
    view.release()


def test_handing_on_a_file_twice_is_refused():
    packed = _adopted()
    _hand_on(packed)
    job = Job("gatekeeper.sandbox.selftest:receive_tensor", {}, timeouts=TIMEOUTS, default_timeout_s=60,
              keep_stdin=True)
    try:
        with pytest.raises(Exception, match="already handed to a worker"):
            job.feed({"t": packed})
    finally:
        job.close_stdin()
        job.wait()
