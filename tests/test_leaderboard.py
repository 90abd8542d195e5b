"""`gatekeeper leaderboard` and `gatekeeper export` over a real store."""

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from gatekeeper.ingest.store import RunKey, Store
from gatekeeper.pipeline import environment
from gatekeeper.report import Category, FileRef, Finding, Location, ProblemRef, Report, Severity, StageName, Verdict

pytestmark = pytest.mark.slow  # builds a store by ingesting submissions

ROOT = Path(__file__).resolve().parent.parent
PROBLEMS = ROOT / "fixtures" / "problems"
FOLDER = ROOT / "fixtures" / "ingest" / "folder"
HOSTILE = "</script><script>document.documentElement.setAttribute('data-pwned','1')</script><img src=x onerror=alert(1)>"


def gk(*args):
    return subprocess.run([sys.executable, "-m", "gatekeeper", *map(str, args)], capture_output=True, text=True,
                          timeout=180, cwd=ROOT)


def add_scored(store: Store, source_id: str, code: str, verdict: Verdict, speedup=None, sol=None,
               findings=(), problem="seed_mean"):
    """Store a result the way a timing run would (no GPU here): a full Report with a score."""
    from gatekeeper.ingest.normalise import sha256_bytes

    sha = sha256_bytes(code.encode())
    psha = "f" * 64 if problem != "seed_mean" else sha256_bytes((PROBLEMS / "seed_mean.py").read_bytes())
    report = Report(verdict=verdict, submission=FileRef(path=source_id, sha256=sha),
                    problem=ProblemRef(path=problem + ".py", sha256=psha, name=problem), profile="default",
                    findings=list(findings), environment=environment(),
                    score={"speedup": speedup, "sol_fraction": sol} if speedup is not None else None)
    key = RunKey("0.1.0", "default", "timing", "t" * 64)
    store.add_submission("timed-source", source_id, problem, psha, sha, sha, code)
    store.add_result({
        "code_key": sha, "submission_sha256": sha, "problem_sha256": psha, "problem": problem,
        "gatekeeper_version": key.gatekeeper_version, "profile": key.profile, "stages": key.stages,
        "config_sha256": key.config_sha256, "source_id": source_id, "verdict": verdict.value,
        "categories": json.dumps(sorted({f.category.value for f in findings if f.severity == Severity.ERROR})),
        "findings_count": len(findings), "speedup": speedup, "sol_fraction": sol, "error": None,
        "duration_s": 1.0, "report_json": report.model_dump_json()})


def hostile_finding(line: int) -> Finding:
    return Finding(rule="GK999", name="Hostile", category=Category.DYNAMIC_CODE, severity=Severity.ERROR,
                   stage=StageName.STATIC, message=f"found {HOSTILE}", hint=f"remove {HOSTILE}",
                   location=Location(path="x.py", line=line, column=1))


@pytest.fixture(scope="module")
def store_path(tmp_path_factory):
    db = tmp_path_factory.mktemp("lb") / "r.db"
    run = gk("ingest", FOLDER, "--problems", PROBLEMS, "--store", db, "--stages", "static")
    assert run.returncode == 0, run.stdout + run.stderr
    store = Store(db)
    add_scored(store, "fast", "class ModelNew: pass  # fast\nFAST = 1\n", Verdict.PASS, speedup=3.5, sol=0.62)
    add_scored(store, "faster", "class ModelNew: pass\nFASTER = 2\n", Verdict.PASS, speedup=5.25, sol=0.81)
    add_scored(store, HOSTILE, f"x = 1\ny = '{HOSTILE}'\nz = 3\n", Verdict.REJECT, findings=[hostile_finding(2)])
    store.flush()
    store.close()
    return db


def test_leaderboard_shows_best_pass_and_rejects_by_category(store_path):
    run = gk("leaderboard", "--store", store_path)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    static = next(l for l in lines if "static · default" in l)
    assert "seed_mean/honest.py" in static and "not timed" in static
    assert "hardcoded-shape 1" in static  # the seed's persistent output is held, not an error
    timed = next(l for l in lines if "timing · default" in l)
    assert "faster" in timed and "5.25x" in timed and "81.0%" in timed and "dynamic-code 1" in timed
    only = gk("leaderboard", "--store", store_path, "--stages", "static")
    assert "timing" not in only.stdout and "seed_mean/honest.py" in only.stdout
    none = gk("leaderboard", "--store", store_path, "--problem", "nope")
    assert none.returncode == 0 and "no results match" in none.stdout


def test_export_has_one_row_per_stored_result(store_path):
    import sqlite3

    total = sqlite3.connect(store_path).execute("SELECT count(*) FROM results").fetchone()[0]
    as_csv = gk("export", "--store", store_path, "--format", "csv")
    assert as_csv.returncode == 0, as_csv.stderr
    rows = list(csv.DictReader(io.StringIO(as_csv.stdout)))
    assert len(rows) == total == 5
    shared = next(r for r in rows if r["source_id"] == "seed_mean/honest.py")
    assert shared["submission_ids"] == "seed_mean/honest.py;seed_mean/honest_reformatted.py"
    faster = next(r for r in rows if r["source_id"] == "faster")
    assert float(faster["speedup"]) == 5.25 and float(faster["sol_fraction"]) == 0.81
    out = store_path.parent / "all.jsonl"
    as_jsonl = gk("export", "--store", store_path, "--format", "jsonl", "--output", out)
    assert as_jsonl.returncode == 0, as_jsonl.stderr
    records = [json.loads(l) for l in out.read_text().splitlines()]
    assert len(records) == total
    assert all(Report.model_validate(r["report"]).verdict.value == r["verdict"] for r in records)


def test_commands_on_a_missing_store_are_usage_errors(tmp_path):
    for command in (("leaderboard",), ("export", "--format", "csv")):
        run = gk(*command, "--store", tmp_path / "none.db")
        assert run.returncode == 2 and "no store" in run.stderr
