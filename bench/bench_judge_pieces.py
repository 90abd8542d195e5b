"""The parent's judgment of one large output at several piece sizes: wall, CPU and minor page
faults (`chunks.CHUNK_ELEMENTS`). Pieces whose float64 temporaries reach glibc's largest mmap
threshold (32 MiB) are mapped, faulted in page by page and unmapped on every operation.

    python bench/bench_judge_pieces.py [--values 8388608] [--rounds 3]
"""

from __future__ import annotations

import argparse
import resource
import time

import torch

import gatekeeper.behaviour.chunks as chunks
from gatekeeper.behaviour.compare import compare, fair_compare
from gatekeeper.sandbox.tensors import pack


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--values", type=int, default=8 << 20)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    torch.manual_seed(0)
    reference = torch.randn(args.values)
    got = reference.clone()
    got[::7] += 1e-3  # wrong in places: every piece is judged in full
    packed, packed64, packed_got = pack(reference), pack(reference.double()), pack(got)

    def tolerance(_dtype: str) -> tuple[float, float]:
        return 1e-4, 1e-4

    print("piece values | wall s | user s | sys s | minor faults")
    for size in (1 << 22, 1 << 20, 1 << 18):
        chunks.CHUNK_ELEMENTS = size
        fair_compare(packed, packed64, packed_got, tolerance)  # warm: the first use maps the heap
        before, start = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        for _ in range(args.rounds):
            fair_compare(packed, packed64, packed_got, tolerance)
            compare(packed, packed_got, tolerance)
        after = resource.getrusage(resource.RUSAGE_SELF)
        print(f"{size} | {time.perf_counter() - start:.2f} | {after.ru_utime - before.ru_utime:.2f} | "
              f"{after.ru_stime - before.ru_stime:.2f} | {after.ru_minflt - before.ru_minflt}")


if __name__ == "__main__":
    main()
