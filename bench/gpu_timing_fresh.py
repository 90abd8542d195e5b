"""GPU check of the two-worker timing method (issue 15: a timing process that looks like a
check, every call sees new data; issue 11 item 4: persisting L2 reset). Run on the H200 from
the repo root through `bench/gpu_timing.sh fresh` (it makes the package importable by the
sandbox's `python -I` workers); results go to $OUT/timing_fresh.jsonl, one JSON line per
case, written as each case finishes, and the same lines on stdout.

Cases, all through the whole CLI (`python -m gatekeeper check --time --format json`):
- seed_honest_events / seed_honest_graph: the honest seed kernel on the seed problem, as
  bench/gpu_e2e.py runs it; compare the speedup with the record in docs/gpu-validation.md
  (1.24x [1.23x, 1.28x] and 1.26x events; 1.17x [1.16x, 1.20x] graph);
- memo_on_reference: arms a memo when the reference `Model` class or the problem module is in
  its process (timing_memo_on_reference.py; the torch-op and work-attribution rules are off
  so it reaches timing): it must never arm, its speedup must be about 1x, and its memo file
  says armed/hits;
- address_memo: an address-keyed memo (timing_address_memo.py, same rules off, and the
  behaviour stage's schedule findings kept as warnings with --keep-going): the timed output
  check must report GK703 if timing runs.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = Path(os.environ.get("OUT") or ROOT / "gpu-out")
PROBLEM = ROOT / "fixtures/problems/seed_mean.py"
SUBS = ROOT / "fixtures/submissions"
MEMO_DIR = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "gatekeeper" / "timing_extensions"


def _config(text: str) -> Path:
    path = Path(tempfile.mkdtemp(prefix="gk-fresh-")) / "gatekeeper.toml"
    path.write_text(text)
    return path


TORCH_RULES_OFF = "[rules.GK304]\nenabled = false\n[rules.GK667]\nenabled = false\n"


def case(label: str, submission: Path, *extra: str) -> dict:
    for old in MEMO_DIR.glob("memo-*.json") if MEMO_DIR.exists() else []:
        old.unlink()
    began = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "gatekeeper", "check", str(submission), "--problem", str(PROBLEM),
                           "--time", "--format", "json", "--seed", "7", *extra],
                          capture_output=True, text=True, timeout=580, cwd=ROOT)
    (OUT / f"fresh_{label}.json").write_text(done.stdout + "\n" + done.stderr[-4000:])
    line: dict = {"case": label, "exit": done.returncode, "wall_s": round(time.monotonic() - began, 1)}
    try:
        report = json.loads(done.stdout)
    except ValueError:
        line["error"] = done.stderr[-800:]
        return line
    t, s = report.get("timing") or {}, report.get("score") or {}
    line.update({
        "verdict": report.get("verdict"),
        "stages": {st["name"]: st["status"] for st in report.get("stages", [])},
        "findings": [f"{f['rule']} {f['name']} {f['severity']}" for f in report.get("findings", [])],
        "submission_median_us": (t.get("submission") or {}).get("median_us"),
        "reference_median_us": (t.get("reference") or {}).get("median_us"),
        "reference_alone_median_us": (t.get("reference_alone") or {}).get("median_us"),
        "pairs": (t.get("submission") or {}).get("count"), "stopped_by": t.get("stopped_by"),
        "speedup": s.get("speedup"), "speedup_ci": [s.get("speedup_ci_low"), s.get("speedup_ci_high")],
        "speedup_basis": s.get("speedup_basis"), "mode": t.get("mode"),
        "input_sets": t.get("input_sets"), "distinct_calls": t.get("distinct_calls"),
        "outputs_checked": t.get("outputs_checked"), "persisting_l2_limit_bytes": t.get("persisting_l2_limit_bytes"),
        "host_call_us": t.get("host_call_us"), "timing_elapsed_s": t.get("elapsed_s"),
        "stage_reasons": {st["name"]: st.get("reason") for st in report.get("stages", []) if st.get("reason")},
    })
    memos = [json.loads(p.read_text()) for p in MEMO_DIR.glob("memo-*.json")] if MEMO_DIR.exists() else []
    if memos:
        line["memo"] = memos
    return line


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    sink = (OUT / "timing_fresh.jsonl").open("a")
    graph = _config("[timing]\nmode = 'graph'\n")
    rules_off = _config(TORCH_RULES_OFF)
    cases = [
        ("seed_honest_events", SUBS / "seed_honest_generic.py"),
        ("seed_honest_graph", SUBS / "seed_honest_generic.py", "--config", str(graph)),
        ("memo_on_reference", SUBS / "timing_memo_on_reference.py", "--config", str(rules_off)),
        ("address_memo", SUBS / "timing_address_memo.py", "--config", str(rules_off), "--keep-going"),
        ("seed_honest_events_again", SUBS / "seed_honest_generic.py"),
    ]
    for label, submission, *extra in cases:
        try:
            line = case(label, submission, *extra)
        except subprocess.TimeoutExpired:
            line = {"case": label, "error": "timed out after 580 s"}
        text = json.dumps(line, default=str)
        print(text, flush=True)
        sink.write(text + "\n")
        sink.flush()
    shutil.rmtree(graph.parent, ignore_errors=True)
    shutil.rmtree(rules_off.parent, ignore_errors=True)


if __name__ == "__main__":
    main()
