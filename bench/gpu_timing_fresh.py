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
- address_memo: an address-keyed memo (timing_address_memo.py, same rules off,
  --keep-going): the behaviour stage rejects both hacks, so timing is skipped there;
- direct_*: the same hacks and the honest probe through the timing stage's two workers alone
  (`gatekeeper.timing.stage.measure`): the memo must be armed (the decoy) with 0 hits, its
  timed outputs must match; the address memo must show mismatches (GK703's evidence); the
  honest probe must match with a speedup near 1x (both sides are torch's mean).
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


def direct(label: str, submission: Path) -> dict:
    """The timing stage's two workers alone (gatekeeper.timing.stage.measure on the GPU), for
    hacks the earlier stages reject before timing could run: memo stats and the timed output
    check say what timing alone would have seen."""
    sys.path.insert(0, str(ROOT))
    from gatekeeper.config import Config
    from gatekeeper.timing.outputs import compare_checks
    from gatekeeper.timing.stage import measure
    from gatekeeper.timing.stats import median

    ext = Path(tempfile.mkdtemp(prefix="gk-fresh-ext-"))
    began = time.monotonic()
    device = os.environ.get("GK_FRESH_DEVICE", "cuda")  # "cpu" only to try the script without a GPU
    out = measure(str(submission), PROBLEM, Config.model_validate({"timing": {"budget_s": 10.0}}), seed=7,
                  device=device, calibrate=False, ext_dir=ext)
    check = compare_checks(out.checks)
    line = {"case": label, "via": "timing.stage.measure", "failed": out.failed, "wall_s": round(time.monotonic() - began, 1),
            "pairs": len(out.paired.submission_us), "stopped_by": out.paired.stopped_by,
            "submission_median_us": median(out.paired.submission_us) if out.paired.submission_us else None,
            "reference_median_us": median(out.paired.reference_us) if out.paired.reference_us else None,
            "reference_alone_median_us": median(out.alone.reference_us) if out.alone.reference_us else None,
            "distinct_calls": out.calls, "input_sets": out.input_sets, "outputs_checked": check["checked"],
            "mismatches": len(check["mismatches"]), "mismatch_detail": check["detail"][:300],
            "persisting_l2_limit": out.persisting_l2_limit, "l2_reset": out.l2_reset, "spin_us": out.spin_us,
            "memo": [json.loads(p.read_text()) for p in ext.glob("memo-*.json")]}
    if out.failed:
        worker = out.submission if out.failed == "submission" else out.reference
        line["worker"] = {"status": worker.status if worker else None, "detail": worker.detail if worker else None,
                          "error": (worker.first("error") or {}).get("message") if worker else None,
                          "stderr": worker.stderr_tail[-600:] if worker else None}
    shutil.rmtree(ext, ignore_errors=True)
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
    cases += [("direct_honest_python", SUBS / "timing_probe_introspect.py", "direct"),
              ("direct_memo_on_reference", SUBS / "timing_memo_on_reference.py", "direct"),
              ("direct_address_memo", SUBS / "timing_address_memo.py", "direct")]
    wanted = set(sys.argv[1:])  # case names, to split a run across the device's 10-minute calls
    for label, submission, *extra in cases:
        if wanted and label not in wanted:
            continue
        try:
            line = direct(label, submission) if extra == ["direct"] else case(label, submission, *extra)
        except subprocess.TimeoutExpired:
            line = {"case": label, "error": "timed out after 580 s"}
        except Exception as exc:  # one case's failure must not lose the others' lines
            line = {"case": label, "error": f"{type(exc).__name__}: {exc}"[:800]}
        text = json.dumps(line, default=str)
        print(text, flush=True)
        sink.write(text + "\n")
        sink.flush()
    shutil.rmtree(graph.parent, ignore_errors=True)
    shutil.rmtree(rules_off.parent, ignore_errors=True)


if __name__ == "__main__":
    main()
