"""End-to-end GPU check of `gatekeeper check --time` through the whole pipeline (static,
build, behaviour, timing), events and CUDA-graph modes. Prints one summary line per case
and writes each JSON report to $OUT (or ./gpu-out). Run from the repo root on a GPU machine
(bench/gpu_timing.sh e2e does the setup)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
import gpu_cases  # noqa: E402

OUT = Path(os.environ.get("OUT") or ROOT / "gpu-out")
SCRATCH = Path(tempfile.mkdtemp(prefix="gk-e2e-"))
SEED_PROBLEM = ROOT / "fixtures/problems/seed_mean.py"


def check(label: str, submission: Path, problem: Path, *extra: str) -> None:
    done = subprocess.run([sys.executable, "-m", "gatekeeper", "check", str(submission), "--problem", str(problem),
                           "--time", "--format", "json", "--seed", "7", *extra],
                          capture_output=True, text=True, timeout=550, cwd=ROOT)
    (OUT / f"e2e_{label}.json").write_text(done.stdout + "\n" + done.stderr[-4000:])
    try:
        report = json.loads(done.stdout)
    except ValueError:
        print(f"--- {label}: exit {done.returncode}, no JSON: {done.stderr[-1500:]}")
        return
    stages = ", ".join(f"{s['name']}={s['status']}" + (f" ({s['reason'][:120]})" if s.get("reason") else "")
                       for s in report["stages"])
    print(f"--- {label}: exit {done.returncode}, verdict {report['verdict']}; {stages}")
    for f in report["findings"]:
        print(f"    {f['rule']} {f['name']} {f['category']} {f['severity']}: {f['message'][:160]}")
    t, s = report.get("timing"), report.get("score")
    if t and s:
        print(f"    mode {t['mode']} ({t['mode_label']}); submission median {t['submission']['median_us']:.3f} us "
              f"IQR {t['submission']['iqr_us']:.3f} us n={t['submission']['count']}; reference median "
              f"{t['reference']['median_us']:.3f} us; floor {t['floors']['floor_us']:.3f} us ({t['floors']['bound']}); "
              f"speedup {s['speedup']:.3f} [{s['speedup_ci_low']}, {s['speedup_ci_high']}]; sol {s['sol_fraction']:.5f}; "
              f"floor fraction {s['floor_fraction']:.3f}; outputs checked {t['outputs_checked']}")
        print(f"    {s['explanation']}")
    if report.get("error"):
        print(f"    error: {report['error'][:300]}")
    print(f"    gpu {report['environment'].get('gpu')} device {report['environment'].get('device')}")


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    honest = ROOT / "fixtures/submissions/seed_honest_generic.py"
    check("seed_hacked", ROOT / "fixtures/submissions/seed_cached_hardcoded.py", SEED_PROBLEM)
    check("seed_honest_events", honest, SEED_PROBLEM)
    graph = SCRATCH / "graph.toml"
    graph.write_text("[timing]\nmode = 'graph'\n")
    check("seed_honest_graph", honest, SEED_PROBLEM, "--config", str(graph))
    problem = SCRATCH / "elementwise_256m.py"
    problem.write_text(gpu_cases.ELEMENTWISE_PROBLEM.format(n=1 << 26))
    escape = SCRATCH / "side_stream.py"
    escape.write_text(gpu_cases.ELEMENTWISE_SIDE_STREAM)
    check("side_stream", escape, problem)


if __name__ == "__main__":
    main()
