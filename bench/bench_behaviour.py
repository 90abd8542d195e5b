"""Where the time of the build and behaviour stages goes, on a small CPU problem.

    python bench/bench_behaviour.py [--repeat 3]

Prints: sandbox spawn (a worker that imports nothing heavy), a worker importing torch,
the build stage cold (empty cache) and cached, and the behaviour stage with a cached
build, split into reference worker, submission worker and judging, with and without the
call schedule (issue 15: hundreds of calls with new inputs). The bar: with a cached
build, the behaviour stage on a small problem under 5 s wall on CPU, process start included.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SUB = ROOT / "fixtures" / "submissions" / "cpu_honest_cpp.py"
PY_SUB = ROOT / "fixtures" / "submissions" / "cpu_honest_python.py"
PROBLEM = ROOT / "fixtures" / "problems" / "cpu_mean.py"


def _median(values: list[float]) -> str:
    return f"{statistics.median(values):7.3f} s" + (f"  (min {min(values):.3f}, max {max(values):.3f})" if len(values) > 1 else "")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    cache = tempfile.mkdtemp(prefix="gk-bench-cache-")
    os.environ["GATEKEEPER_CACHE_DIR"] = cache
    import gatekeeper
    from gatekeeper.behaviour import stage as behaviour_stage
    from gatekeeper.config import load_config
    from gatekeeper.sandbox import detect, run_job

    config = load_config(overrides={"profile": "default"})
    print(f"isolation: {detect().name}; cpus: {os.cpu_count()}; load average: {os.getloadavg()[0]:.2f}")
    rows: list[tuple[str, list[float]]] = []

    spawn = []
    for _ in range(args.repeat):
        began = time.perf_counter()
        run_job("gatekeeper.sandbox.selftest:echo", {"value": 1}, timeouts={})
        spawn.append(time.perf_counter() - began)
    rows.append(("spawn a sandboxed worker (no torch)", spawn))

    torch_import = []
    for _ in range(args.repeat):
        began = time.perf_counter()
        run_job("gatekeeper.sandbox.selftest:run_code", {"code": "import torch\nresult = 1"}, timeouts={})
        torch_import.append(time.perf_counter() - began)
    rows.append(("spawn + import torch in the worker", torch_import))

    began = time.perf_counter()
    report = gatekeeper.check(SUB, PROBLEM, stages="build", config=config)
    rows.append(("build stage, cold cache (compile)", [time.perf_counter() - began]))
    assert report.verdict.value == "pass", report.model_dump_json(indent=1)

    cached = []
    for _ in range(args.repeat):
        began = time.perf_counter()
        gatekeeper.check(SUB, PROBLEM, stages="build", config=config)
        cached.append(time.perf_counter() - began)
    rows.append(("build stage, cached", cached))

    runs = [("C++ extension, cached build", SUB, True), ("C++ extension, cached build, no call schedule", SUB, False),
            ("plain Python", PY_SUB, True)]
    for label, sub, schedule in runs:
        walls: list[float] = []
        parts: dict[str, list[float]] = {}
        behaviour_stage.SCHEDULE = schedule  # the call schedule (issue 15): its cost is the difference
        for _ in range(args.repeat):
            self_before = resource.getrusage(resource.RUSAGE_SELF)
            kids_before = resource.getrusage(resource.RUSAGE_CHILDREN)
            report = gatekeeper.check(sub, PROBLEM, stages="behaviour", config=config, keep_going=True)
            self_after = resource.getrusage(resource.RUSAGE_SELF)
            kids_after = resource.getrusage(resource.RUSAGE_CHILDREN)
            parts.setdefault("cpu_time_workers_s", []).append(
                kids_after.ru_utime + kids_after.ru_stime - kids_before.ru_utime - kids_before.ru_stime)
            parts.setdefault("cpu_time_parent_s", []).append(
                self_after.ru_utime + self_after.ru_stime - self_before.ru_utime - self_before.ru_stime)
            stage = next(s for s in report.stages if s.name.value == "behaviour")
            assert stage.status.value == "passed" or sub == PY_SUB, report.model_dump_json(indent=1)
            walls.append(stage.duration_s)
            for key, value in behaviour_stage.LAST_TIMINGS.items():
                parts.setdefault(key, []).append(value)
            if schedule:
                parts.setdefault("scheduled_calls", []).append(float(behaviour_stage.LAST_SCHEDULE.get("observed", 0)))
        rows.append((f"behaviour stage, {label}: total", walls))
        for key in ("reference_worker_s", "worker_torch_import_s", "worker_submission_import_s",
                    "worker_waited_for_reference_s", "worker_calls_s", "worker_schedule_s", "scheduled_calls", "judge_s",
                    "cpu_time_workers_s", "cpu_time_parent_s"):
            if key in parts:
                rows.append((f"    {key}", parts[key]))

    width = max(len(name) for name, _ in rows)
    for name, values in rows:
        shown = f"{statistics.median(values):7.0f}" if name.strip() == "scheduled_calls" else _median(values)
        print(f"{name:<{width}}  {shown}")
    print(f"(medians of {args.repeat}; python {sys.version.split()[0]}; load average now "
          f"{os.getloadavg()[0]:.2f}; cpu_time_* are CPU seconds, independent of other load)")


if __name__ == "__main__":
    main()
