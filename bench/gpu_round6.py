"""Sixth GPU round (docs/gpu-validation.md): (submission, problem) pairs through the whole
pipeline up to the behaviour stage, one after another (so that the repeated-contents probe's
call times are not shared with another case on the GPU), with what the probe measured (GK678,
gatekeeper/behaviour/repeat_probe.py) recorded for each case, found or not: the report carries
the measurement only inside a GK678 finding, so an honest case's numbers come from here.

    GATEKEEPER_ISOLATION=bwrap python bench/gpu_round6.py --out "$OUT" \
        --case fixtures/submissions/shape_honest_triton_matmul.py:fixtures/problems/shape_matmul.py \
        --case fixtures/submissions/content_memo_triton_gemm.py:fixtures/problems/shape_matmul.py:keep-going

One JSON line per case in $OUT/round6.jsonl (flushed as it goes) and each whole report in
$OUT/reports/<submission>__<problem>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=os.environ.get("OUT", "."))
    parser.add_argument("--case", action="append", default=[], help="SUBMISSION:PROBLEM[:keep-going]")
    args = parser.parse_args()
    out = Path(args.out)
    (out / "reports").mkdir(parents=True, exist_ok=True)

    import gatekeeper
    from gatekeeper.behaviour import repeat_probe

    measured: list[dict] = []
    judge = repeat_probe.RepeatProbe.judge

    def recording_judge(self, add):
        result = judge(self, add)
        measured.append(dict(result))
        return result

    repeat_probe.RepeatProbe.judge = recording_judge
    with (out / "round6.jsonl").open("a") as sink:
        for spec in args.case:
            sub, problem, *rest = spec.split(":")
            keep_going = rest == ["keep-going"]
            measured.clear()
            began = time.perf_counter()
            try:
                report = gatekeeper.check(Path(sub), Path(problem), stages="behaviour", keep_going=keep_going)
            except Exception as exc:  # a crash of ours is recorded, not hidden
                record = {"case": sub, "problem": problem, "crash": f"{type(exc).__name__}: {exc}"[:600]}
            else:
                stem = Path(sub).stem if Path(sub).stem != "solution" else Path(sub).parent.name
                (out / "reports" / f"{stem}__{Path(problem).stem}.json").write_text(report.model_dump_json(indent=1))
                env = report.environment
                record = {
                    "case": sub, "problem": problem, "keep_going": keep_going, "verdict": report.verdict.value,
                    "seconds": round(time.perf_counter() - began, 1),
                    "isolation": env.isolation if env else None,
                    "device": getattr(env, "device", None) if env else None, "gpu": getattr(env, "gpu", None) if env else None,
                    "stages": {s.name.value: s.status.value for s in report.stages},
                    "errors": [f"{f.rule} {f.stage.value} {f.category.value}: {f.message[:500]}" for f in report.errors()],
                    "warnings": [f"{f.rule} {f.stage.value}: {f.message[:200]}" for f in report.findings
                                 if f.severity.value == "warning"],
                    "unconfirmed": [f.rule for f in report.unconfirmed()], "error": (report.error or "")[:400],
                    "repeat_probe": measured[-1] if measured else None,
                    "bundle": [getattr(f, "path", str(f)) for f in (report.bundle or [])],
                }
            line = json.dumps(record, default=str)
            sink.write(line + "\n")
            sink.flush()
            print(line[:1500], flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
