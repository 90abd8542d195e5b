"""Throughput of the large-tensor path on this machine (CPU tensors, in one process):
spill write (hash + write), parent adoption (unlink + hash), worker read (read + hash into a
tensor), and the chunked comparison, each in MiB/s or millions of values per second.

    python bench/bench_large_tensors.py [--mib 256]
"""

from __future__ import annotations

import argparse
import tempfile
import time

import torch

from gatekeeper.behaviour.compare import compare, error_ratio
from gatekeeper.sandbox.spill import adopt_tree, read_into, write


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mib", type=int, default=256)
    args = parser.parse_args()
    numel = args.mib * 2**20 // 4
    tensor = torch.randn(numel)
    with tempfile.TemporaryDirectory() as folder:
        began = time.perf_counter()
        descriptor = write(tensor, folder)
        written = time.perf_counter() - began
        began = time.perf_counter()
        read_into(descriptor, torch.empty(numel), folder)
        read = time.perf_counter() - began
        packed = {"__tensor__": True, "dtype": "float32", "shape": [numel], "stride": [1], "device": "cpu",
                  "file": descriptor}
        began = time.perf_counter()
        adopted = adopt_tree(packed, folder)
        adoption = time.perf_counter() - began
        other = adopt_tree(dict(packed, file=write(tensor * (1 + 1e-7), folder)), folder)
        began = time.perf_counter()
        result = compare(adopted, other, lambda _: (1e-5, 1e-5))
        compared = time.perf_counter() - began
        began = time.perf_counter()
        error_ratio(adopted, adopted, other, max_numel=numel)
        budget = time.perf_counter() - began
    mib = args.mib
    print(f"tensor {mib} MiB float32, torch threads {torch.get_num_threads()}")
    print(f"  spill write (sha256 + write)     {mib / written:8.0f} MiB/s")
    print(f"  worker read (read + sha256)      {mib / read:8.0f} MiB/s")
    print(f"  parent adoption (unlink + sha256){mib / adoption:8.0f} MiB/s")
    print(f"  chunked compare ({'ok' if result.ok else 'mismatch'})            {numel / compared / 1e6:8.1f} M values/s")
    print(f"  chunked error budget             {numel / budget / 1e6:8.1f} M values/s")


if __name__ == "__main__":
    main()
