"""What the warm worker saves (docs/design-warm-worker.md): N full checks in one process, with
jobs forked from the zygote and with fresh workers, alternately. A measurement, not a test.

    python bench/bench_warm_worker.py [--checks 10] [--rounds 2]

Checks `fixtures/submissions/cpu_honest_cpp.py` against `fixtures/problems/cpu_mean.py`
(build cached after the first check; seeds 0..N-1) under bubblewrap. Each round runs both
kinds in a fresh interpreter and prints wall time and the machine's busy CPU time from
/proc/stat (sandboxed workers are reaped below bubblewrap, so their CPU never reaches this
process's rusage): run it on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_ONE_KIND = """
import sys, time
from pathlib import Path
import gatekeeper
from gatekeeper.sandbox import warm
F = Path(sys.argv[1]) / "fixtures"
def busy():
    v = open("/proc/stat").readline().split()[1:]
    return sum(int(x) for x in v[:3]) + sum(int(x) for x in v[5:8])
gatekeeper.check(F / "submissions/cpu_honest_cpp.py", F / "problems/cpu_mean.py", seed=0)  # the build, cached
b0, t0 = busy(), time.time()
for seed in range(int(sys.argv[2])):
    report = gatekeeper.check(F / "submissions/cpu_honest_cpp.py", F / "problems/cpu_mean.py", seed=seed)
    assert report.verdict.value == "pass", report.verdict
print(f"{time.time() - t0:.1f} {(busy() - b0) / os.sysconf('SC_CLK_TCK'):.1f} {report.environment.isolation} "
      f"{warm.disabled_reason or ''}")
""".replace("import sys, time", "import os, sys, time")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--checks", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    for round_number in range(1, args.rounds + 1):
        for kind, flag in (("warm", "1"), ("fresh", "0")):
            env = dict(os.environ, GATEKEEPER_WARM_WORKER=flag)
            done = subprocess.run([sys.executable, "-c", _ONE_KIND, str(ROOT), str(args.checks)], env=env,
                                  capture_output=True, text=True, check=False)
            if done.returncode != 0:
                print(f"round {round_number} {kind}: failed: {done.stderr.strip()[-400:]}")
                continue
            wall, cpu, isolation, why_off = (done.stdout.strip().split(" ", 3) + [""])[:4]
            note = f" (warm path off: {why_off})" if why_off else ""
            print(f"round {round_number} {kind:5}: {args.checks} checks, {wall} s wall, {cpu} core-s busy "
                  f"(isolation {isolation}){note}")


if __name__ == "__main__":
    main()
