"""CPU figures for the two-worker timing method (no GPU needed): what preparing a call's fresh
inputs costs (gatekeeper.timing.fresh; on the GPU it is a device copy outside the timed
region), and what the parent's block protocol costs per block (two workers, alternating
blocks, sampled-output reports), from a run of the seed problem with a fixed number of
pairs. Prints one line per figure. `python bench/bench_timing_fresh.py`"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import torch

from gatekeeper.config import Config
from gatekeeper.timing.fresh import FreshInputs
from gatekeeper.timing.stage import measure

ROOT = Path(__file__).resolve().parent.parent


def prepare_cost() -> None:
    for shape in [(4, 16, 48), (1024, 1024), (4096, 4096)]:
        bases = [[torch.randn(*shape)] for _ in range(4)]
        fresh = FreshInputs(bases, key=1)
        for i in range(8):
            fresh.prepare(i)
        reps = 200 if shape[0] < 4096 else 20
        t0 = time.perf_counter()
        for i in range(8, 8 + reps):
            fresh.prepare(i)
        per = (time.perf_counter() - t0) / reps * 1e6
        mb = bases[0][0].numel() * 4 / 2**20
        print(f"prepare {shape}: {per:.1f} us per call ({mb:.2f} MiB input, rolled copy + one scaled element)",
              flush=True)


def protocol_cost(pairs: int) -> None:
    config = Config.model_validate({"timing": {"min_reps": pairs, "max_reps": pairs, "batch": 25, "budget_s": 600,
                                               "warmup_calls": 5}})
    ext = Path(tempfile.mkdtemp())
    t0 = time.perf_counter()
    out = measure(str(ROOT / "fixtures/submissions/timing_probe_introspect.py"), ROOT / "fixtures/problems/seed_mean.py",
                  config, seed=1, device="cpu", calibrate=False, ext_dir=ext)
    wall = time.perf_counter() - t0
    assert out.failed is None, out.failed
    inside = (sum(out.alone.reference_us) + sum(out.paired.reference_us) + sum(out.paired.submission_us)) / 1e6
    blocks = len(out.paired.submission_us) / 25
    print(f"measure, {pairs} alone + {pairs} pairs on CPU: {wall:.1f} s wall, {inside:.2f} s inside timed calls, "
          f"{out.calls} distinct call indices, {out.input_sets} input sets, {len(out.checks)} outputs compared",
          flush=True)
    print(f"  alone phase {out.alone.elapsed_s:.2f} s, paired phase {out.paired.elapsed_s:.2f} s "
          f"({out.paired.elapsed_s / max(blocks, 1) * 1e3:.1f} ms per paired block of 25 calls a side, with the "
          f"report round trip)", flush=True)


if __name__ == "__main__":
    torch.set_num_threads(1)
    prepare_cost()
    protocol_cost(200)
