"""Issue 5 item 6: the timing method's median against Nsight Compute's gpu__time_duration.

    python bench/gpu_ncu.py time      # our method (gatekeeper.timing.method), prints the median
    ncu --clock-control none --metrics gpu__time_duration.sum --csv -k regex:scale_shift \
        python bench/gpu_ncu.py profile   # 30 launches under ncu (which flushes caches itself)
    python bench/gpu_ncu.py compare ncu.csv time.json

The kernel is the Triton elementwise kernel of gpu_cases.py on 256 MiB of float32 (about
120 µs on an H200), with rotating input sets as in a timed run.
"""

from __future__ import annotations

import csv
import json
import sys
import types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
N = 1 << 26


def _op():
    import torch

    import gpu_cases

    module = types.ModuleType("gk_ncu_sub")
    folder = Path(__file__).resolve().parent / ".gpu_ncu_sub.py"
    folder.write_text(gpu_cases.ELEMENTWISE_TRITON)
    module.__file__ = str(folder)
    exec(compile(gpu_cases.ELEMENTWISE_TRITON, str(folder), "exec"), module.__dict__)
    model = module.ModelNew()
    sets = [[torch.randn(N, device="cuda")] for _ in range(4)]
    return model, sets


def time_it() -> dict:
    import torch

    from gatekeeper.timing import method
    from gatekeeper.timing.adaptive import StopRule
    from gatekeeper.timing.stats import summarize

    model, sets = _op()
    side = method.Side("kernel", model, sets)
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    result = method.time_pair(side, None, rule=StopRule(min_reps=100, max_reps=2000, budget_s=10),
                              warmup_calls=10, l2_bytes=l2, flush_factor=2.0)
    s = summarize(result.sampled.reference_us)
    out = {"median_us": s.median_us, "iqr_us": s.iqr_us, "count": s.count, "ci_low_us": s.ci_low_us,
           "ci_high_us": s.ci_high_us}
    print(json.dumps(out))
    return out


def profile() -> None:
    import torch

    model, sets = _op()
    for k in range(30):
        model(*sets[k % len(sets)])
    torch.cuda.synchronize()


def compare(ncu_csv: str, ours_json: str) -> None:
    from gatekeeper.timing.stats import median

    scale = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3}
    values = []
    lines = Path(ncu_csv).read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith('"ID"'))
    for row in csv.DictReader(lines[start:]):
        if row.get("Metric Name") == "gpu__time_duration.sum":
            values.append(float(row["Metric Value"].replace(",", "")) * scale[row["Metric Unit"]])
    ours = json.loads(Path(ours_json).read_text().strip().splitlines()[-1])
    ncu_median = median(values[3:]) if len(values) > 6 else median(values)
    diff = (ours["median_us"] - ncu_median) / ncu_median
    print(json.dumps({"ncu_kernels": len(values), "ncu_median_us": ncu_median, "ours_median_us": ours["median_us"],
                      "relative_difference": diff, "within_10_percent": abs(diff) <= 0.10}))


if __name__ == "__main__":
    what = sys.argv[1]
    if what == "time":
        time_it()
    elif what == "profile":
        profile()
    else:
        compare(sys.argv[2], sys.argv[3])
