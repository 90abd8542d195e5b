"""What the worker harness (gatekeeper/sandbox/shim.py, isolation `none`) costs per worker.

Times, alternating, N starts of a trivial program directly and through the shim, and N
sandboxed no-op jobs (`selftest:echo`) under `none` (which always use the shim), and prints
medians. Usage: python bench/bench_worker_harness.py [N]
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time

from gatekeeper.sandbox.isolation import SHIM_SCRIPT

N = int(sys.argv[1]) if len(sys.argv) > 1 else 20
PROGRAM = [sys.executable, "-I", "-S", "-c", "pass"]


def _once(argv: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, check=True)
    return time.perf_counter() - started


def main() -> None:
    direct, shimmed = [], []
    through = [sys.executable, "-I", "-B", "-S", SHIM_SCRIPT, str(os.getpid()), "--", *PROGRAM]
    for _ in range(N):
        direct.append(_once(PROGRAM))
        shimmed.append(_once(through))
    os.environ["GATEKEEPER_ISOLATION"] = "none"
    from gatekeeper.sandbox import run_job

    jobs = []
    for _ in range(N):
        started = time.perf_counter()
        result = run_job("gatekeeper.sandbox.selftest:echo", {"value": 1}, timeouts={"work": 30})
        assert result.status == "ok", result
        jobs.append(time.perf_counter() - started)
    load = os.getloadavg()[0]
    print(f"n={N}, load average {load:.1f}")
    print(f"python -I -S -c pass, direct:        median {statistics.median(direct) * 1000:.1f} ms")
    print(f"python -I -S -c pass, through shim:  median {statistics.median(shimmed) * 1000:.1f} ms "
          f"(harness {1000 * (statistics.median(shimmed) - statistics.median(direct)):+.1f} ms)")
    print(f"sandboxed echo job under none:       median {statistics.median(jobs) * 1000:.1f} ms")


if __name__ == "__main__":
    main()
