"""A worker keeps the memory it frees (sandbox/worker.py `_keep_freed_memory`): a large
block is served from its heap, and a block freed and allocated again costs no new page
faults. Glibc's default maps every block of 32 MiB or more afresh and unmaps it on free, so a
large problem faulted in its inputs, outputs and temporaries anew on every call."""

from __future__ import annotations

import sys

import pytest

from gatekeeper.sandbox import run_job

PROBE = """
import ctypes, resource
class Info(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]
libc = ctypes.CDLL(None)
libc.mallinfo2.restype = Info
def faults(size):
    before, base = resource.getrusage(resource.RUSAGE_SELF).ru_minflt, libc.mallinfo2().hblkhd
    block = bytearray(size)          # zeroed: every page is touched
    block[::4096] = b"\\x01" * len(block[::4096])
    mapped = libc.mallinfo2().hblkhd - base  # bytes in blocks glibc mapped on their own
    del block
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before, mapped
first, mapped_first = faults(64 << 20)
second, mapped_second = faults(64 << 20)
result = {"first": first, "second": second, "mapped": max(mapped_first, mapped_second)}
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator")
def test_a_worker_serves_large_blocks_from_its_heap_and_reuses_them():
    result = run_job("gatekeeper.sandbox.selftest:run_code", {"code": PROBE},
                     timeouts={"import": 60, "call": 60}, default_timeout_s=60)
    assert result.status == "ok", (result.status, result.detail)
    got = result.of_kind("result")[0]["value"]
    pages = (64 << 20) // 4096
    assert got["mapped"] < (1 << 20), got  # not mapped on its own: from the heap
    assert got["first"] >= pages // 2, got  # the first time the pages are new
    assert got["second"] < pages // 16, got  # the second time they are the same pages
