"""How often the large-problem fixture is rejected (issue 22 item 1): a measurement, not a test.

    python bench/bench_large_problem_repeat.py [--n 20] [--mib 32] [--no-load]

Runs the behaviour stage N times on a ReLU problem of MIB MiB against a submission that
returns x.clone() (fixtures/submissions/large_relu_clone.py), with a background process
keeping one core busy (unless --no-load). Before issue 22 it passed 7 of 9 runs with 0 calls
(the trials message was lost). Prints one line per run (verdict, findings, calls planned and
observed, wall time, and the parent process's CPU and minor page faults) and the count
rejected; docs/behaviour.md records the figure, docs/large-tensors.md the costs. With
GATEKEEPER_ISOLATION=none the parent reaps the workers itself, and their CPU time and page
faults are printed too (bubblewrap's own processes reap them otherwise).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
SUB = ROOT / "fixtures" / "submissions" / "large_relu_clone.py"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=20)
    parser.add_argument("--mib", type=int, default=32)
    parser.add_argument("--no-load", action="store_true")
    args = parser.parse_args()
    import contextlib
    import resource

    import gatekeeper
    from gatekeeper.behaviour import stage
    from large_problem_support import CpuBurner, write_relu_problem

    rejected = 0
    with tempfile.TemporaryDirectory() as folder, \
            (contextlib.nullcontext() if args.no_load else CpuBurner()):
        problem = write_relu_problem(Path(folder), args.mib)
        for run in range(args.n):
            began, usage = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
            workers = resource.getrusage(resource.RUSAGE_CHILDREN)
            report = gatekeeper.check(SUB, problem, stages="behaviour", keep_going=True)
            codes = sorted({f.rule for f in report.findings if f.severity.value == "error"})
            rejected += report.verdict.value == "reject"
            after = resource.getrusage(resource.RUSAGE_SELF)
            parent = (f"parent: user {after.ru_utime - usage.ru_utime:.1f} s, system {after.ru_stime - usage.ru_stime:.1f} s, "
                      f"{after.ru_minflt - usage.ru_minflt} minor page faults")
            done = resource.getrusage(resource.RUSAGE_CHILDREN)
            if done.ru_minflt > workers.ru_minflt:  # workers the parent reaped itself (GATEKEEPER_ISOLATION=none)
                parent += (f"; workers: user {done.ru_utime - workers.ru_utime:.1f} s, system "
                           f"{done.ru_stime - workers.ru_stime:.1f} s, "
                           f"{(done.ru_minflt - workers.ru_minflt) * 4096 / 2**30:.1f} GiB of minor page faults")
            print(f"run {run + 1:2d}: {report.verdict.value:6s} {','.join(codes) or '-':20s} schedule "
                  f"{stage.LAST_SCHEDULE.get('observed')}/{stage.LAST_SCHEDULE.get('sent')} calls "
                  f"({time.perf_counter() - began:.1f} s; {parent})"
                  f"{'  ' + (report.error or '') if report.error else ''}",
                  flush=True)
    print(f"rejected {rejected} of {args.n} runs ({args.mib} MiB, {'no load' if args.no_load else 'one core busy'})")


if __name__ == "__main__":
    main()
