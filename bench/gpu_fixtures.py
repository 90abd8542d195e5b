"""The labelled fixtures that build GPU code (CUDA through load_inline, or Triton), through the
whole pipeline on a GPU under the isolation GATEKEEPER_ISOLATION names (bwrap for issue 23
item 2), several at a time. The manifest labels are the static stage's; here a hacked fixture
must be rejected by some stage and an honest one must pass every stage that runs. A fixture
whose static verdict is held (`held = true`) is the interesting case: only a run-time check
can reject it under the default profile.

One JSON line per fixture in $OUT/gpu_fixtures.jsonl, flushed as it goes, and the whole report
of every case that did not end as labelled in $OUT/reports/ (to read why):
    GATEKEEPER_ISOLATION=bwrap python bench/gpu_fixtures.py --jobs 12 --budget 420
A later run can go on where one was cut off, and re-run chosen cases (substrings of the
submission path, comma-separated):
    python bench/gpu_fixtures.py --skip-done old/gpu_fixtures.jsonl --rerun own_gemm,lazy_closure
    python bench/gpu_fixtures.py --only shape_honest_checks
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
import tomllib
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
GPU_CODE = re.compile(r"__global__|@triton\.jit")


def pinned_to_cpu(problem: Path) -> bool:
    """A problem whose sidecar (reference.toml beside reference.py, or <name>.toml) says
    device = "cpu": its workers run on the CPU, so a GPU kernel checked against it says nothing
    about the GPU (2026-12-05: two Triton fixtures of kbhard_head_rmsnorm got GK663 that way)."""
    sidecar = problem / "reference.toml" if problem.is_dir() else problem.with_suffix(".toml")
    return sidecar.is_file() and tomllib.loads(sidecar.read_text("utf-8")).get("device") == "cpu"


def _has_gpu_code(path: Path) -> bool:
    """A GPU kernel in the submission file, or in a CUDA source of its bundle beside it (a
    `solution.py` that loads `mean.cu`: the sixth round's bundles were missed)."""
    if GPU_CODE.search(path.read_text("utf-8", "replace")):
        return True
    if path.name != "solution.py":  # a lone file among many fixtures: its folder is not its bundle
        return False
    return any(GPU_CODE.search(cu.read_text("utf-8", "replace"))
               for cu in sorted(path.parent.glob("*.cu")) + sorted(path.parent.glob("*.cuh")))


def gpu_cases() -> list[dict]:
    cases, seen = [], set()
    for manifest in sorted((FIXTURES / "manifest").glob("*.toml")):
        for case in tomllib.loads(manifest.read_text("utf-8")).get("case", []):
            path = FIXTURES / case["submission"]
            if not case.get("problem") or not path.is_file() or case.get("profile", "default") != "default":
                continue
            key = (case["submission"], case["problem"])
            if key in seen or not _has_gpu_code(path):
                continue
            if pinned_to_cpu(FIXTURES / case["problem"]):
                continue
            seen.add(key)
            cases.append({**case, "manifest": manifest.stem})
    # honest ones and held hacks first: they are the ones that reach the GPU
    cases.sort(key=lambda c: (c["verdict"] == "reject" and not c.get("held"), c["submission"]))
    return cases


def done_keys(paths: list[str]) -> set[tuple[str, str]]:
    """(submission, problem) of every case a previous run recorded; a line cut off when that
    run was killed is not a finished case."""
    keys = set()
    for path in paths:
        for line in Path(path).read_text("utf-8").splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if record.get("problem"):
                keys.add((record["case"], record["problem"]))
    return keys


def select(cases: list[dict], only: list[str], skip: set[tuple[str, str]], rerun: list[str]) -> list[dict]:
    """`only` narrows to the named cases; a case a previous run finished is skipped unless `rerun` names it."""
    chosen = []
    for case in cases:
        name = case["submission"]
        if only and not any(o in name for o in only):
            continue
        if (name, case["problem"]) in skip and not any(r in name for r in rerun):
            continue
        chosen.append(case)
    return chosen


def run(case: dict, reports: str = "") -> dict:
    import gatekeeper

    began = time.perf_counter()
    try:
        report = gatekeeper.check(FIXTURES / case["submission"], FIXTURES / case["problem"], stages="behaviour")
    except Exception as exc:  # a crash of ours is recorded, not hidden
        return {"case": case["submission"], "crash": f"{type(exc).__name__}: {exc}"[:600]}
    verdict = report.verdict.value
    # `gpu_verdict`: where the whole pipeline's verdict under default differs from the static label
    # by policy (a library doing the contraction beside an own kernel is a warning, docs/verdicts.md)
    label = case.get("gpu_verdict", case["verdict"])
    if reports and verdict != label:  # the whole report, to read why it did not end as labelled
        stem = Path(case["submission"]).stem + "__" + Path(case["problem"]).stem
        (Path(reports) / f"{stem}.json").write_text(report.model_dump_json(indent=1))
    return {"case": case["submission"], "problem": case["problem"], "label": label, "held": bool(case.get("held")),
            "verdict": verdict, "as_labelled": verdict == label, "seconds": round(time.perf_counter() - began, 1),
            "isolation": (report.environment.isolation if report.environment else None),
            "stages": {s.name.value: s.status.value for s in report.stages},
            "errors": [f"{f.rule} {f.stage.value} {f.category.value}: {f.message[:600]}" for f in report.errors()],
            "unconfirmed": [f.rule for f in report.unconfirmed()], "error": (report.error or "")[:400]}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=os.environ.get("OUT", "."))
    parser.add_argument("--jobs", type=int, default=12)
    parser.add_argument("--budget", type=float, default=420.0, help="seconds; no new fixture starts after it")
    parser.add_argument("--skip-done", nargs="*", default=[], metavar="JSONL", help="skip cases these earlier runs finished")
    parser.add_argument("--rerun", default="", help="comma-separated substrings: run these even if done")
    parser.add_argument("--only", default="", help="comma-separated substrings of submission paths: run only these")
    args = parser.parse_args()
    out = Path(args.out)
    (out / "reports").mkdir(parents=True, exist_ok=True)
    sink = os.open(out / "gpu_fixtures.jsonl", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    began = time.perf_counter()
    split = lambda text: [t for t in text.split(",") if t]  # noqa: E731
    cases = select(gpu_cases(), split(args.only), done_keys(args.skip_done), split(args.rerun))
    print(f"{len(cases)} GPU fixtures", flush=True)
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        pending = {pool.submit(run, c, str(out / "reports")) for c in cases}
        for fut in as_completed(pending):
            if fut.cancelled():
                continue
            record = fut.result()
            os.write(sink, (json.dumps(record, default=str) + "\n").encode())  # one write: a kill leaves no half line
            print(json.dumps({k: record.get(k) for k in ("case", "label", "held", "verdict", "errors", "crash")},
                             default=str)[:400], flush=True)
            if time.perf_counter() - began > args.budget:
                for other in pending:
                    other.cancel()
    return 0


if __name__ == "__main__":
    sys.exit(main())
