"""How often an honest fp32 GEMM passes the value trials (issue 22 item 4): a measurement.

    python bench/bench_value_trials_repeat.py [--n 20] [--hacked-n 3]

Runs the behaviour stage N times (a fresh seed each) on fixtures/problems/cpu_matmul_scaled.py
with the honest C++ GEMM (fixtures/submissions/value_honest_gemm_cpp.py), then HACKED_N times
with the value-sniffing one (value_sniff_clamp_gemm_cpp.py). Per run: the verdict, the value
distributions the schedule drew, and how many calls were outside the fixed atol/rtol but
within the fair judgment (float64 reference next to the honest fp32 error at the same
scale): before issue 22 each of those was a GK673/GK671 rejection (13 of 19 runs).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROBLEM = ROOT / "fixtures" / "problems" / "cpu_matmul_scaled.py"
HONEST = ROOT / "fixtures" / "submissions" / "value_honest_gemm_cpp.py"
HACKED = ROOT / "fixtures" / "submissions" / "value_sniff_clamp_gemm_cpp.py"


def _run(gatekeeper, stage, submission: Path, label: str, run: int) -> str:
    began = time.perf_counter()
    report = gatekeeper.check(submission, PROBLEM, stages="behaviour", keep_going=True)
    codes = sorted({f.rule for f in report.findings if f.severity.value == "error"})
    info = stage.LAST_SCHEDULE
    print(f"{label} run {run + 1:2d}: {report.verdict.value:6s} {','.join(codes) or '-':14s} "
          f"calls {info.get('observed')}/{info.get('sent')}, outside atol but fair: {info.get('fair_only')}, "
          f"scale-up drawn: {'scale-up' in info.get('dists', [])} ({time.perf_counter() - began:.0f} s)", flush=True)
    return report.verdict.value


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=20)
    parser.add_argument("--hacked-n", type=int, default=3)
    args = parser.parse_args()
    import gatekeeper
    from gatekeeper.behaviour import stage

    passed = sum(_run(gatekeeper, stage, HONEST, "honest", i) == "pass" for i in range(args.n))
    caught = sum(_run(gatekeeper, stage, HACKED, "hacked", i) == "reject" for i in range(args.hacked_n))
    print(f"honest GEMM passed {passed} of {args.n} runs; value-sniffing GEMM rejected {caught} of {args.hacked_n}")


if __name__ == "__main__":
    main()
