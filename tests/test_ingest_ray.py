"""`gatekeeper ingest --executor ray`: a real local Ray instance on CPU gives the local pool's verdicts."""

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PROBLEMS = ROOT / "fixtures" / "problems"
sys.path.insert(0, str(ROOT / "fixtures" / "ingest"))
from make_batch import write_jsonl  # noqa: E402

pytestmark = pytest.mark.slow  # starts a Ray cluster


def gk(*args, env=None, timeout=180):
    return subprocess.run([sys.executable, "-m", "gatekeeper", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT, env=env)


def _verdicts(db):
    conn = sqlite3.connect(db)
    try:
        rows = conn.execute("SELECT s.source_id, r.verdict, r.categories FROM submissions s "
                            "JOIN results r ON r.code_key = s.code_key").fetchall()
    finally:
        conn.close()
    return {sid: (verdict, sorted(json.loads(cats or "[]"))) for sid, verdict, cats in rows}


def test_ray_and_the_local_pool_give_the_same_verdicts_and_ray_resumes(tmp_path):
    pytest.importorskip("ray")
    batch = write_jsonl(tmp_path / "b.jsonl", 12)
    with batch.open("a") as handle:  # the folder fixtures too, the reformatted copy shares a result
        for path in sorted((ROOT / "fixtures" / "ingest" / "folder" / "seed_mean").glob("*.py")):
            handle.write(json.dumps({"id": path.name, "problem": "seed_mean", "code": path.read_text()}) + "\n")
    common = ("--problems", PROBLEMS, "--stages", "static", "--jobs", "2")
    local = gk("ingest", batch, *common, "--store", tmp_path / "a.db")
    assert local.returncode == 0, local.stderr
    ray = gk("ingest", batch, *common, "--store", tmp_path / "b.db", "--executor", "ray")
    assert ray.returncode == 0, ray.stderr
    a, b = _verdicts(tmp_path / "a.db"), _verdicts(tmp_path / "b.db")
    assert len(a) == 15 and a == b
    assert {v for v, _ in b.values()} == {"pass", "reject"}
    again = gk("ingest", batch, *common, "--store", tmp_path / "b.db", "--executor", "ray")
    assert again.returncode == 0 and "0 checked" in again.stdout
    assert _verdicts(tmp_path / "b.db") == b


def test_without_ray_the_executor_is_a_usage_error_with_the_install_hint(tmp_path):
    (tmp_path / "ray.py").write_text("raise ImportError('no ray here')\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    batch = write_jsonl(tmp_path / "b.jsonl", 2)
    result = gk("ingest", batch, "--problems", PROBLEMS, "--store", tmp_path / "r.db", "--stages", "static",
                "--executor", "ray", env=env)
    assert result.returncode == 2, result.stderr
    assert "pip install 'kernel-gatekeeper[ray]'" in result.stderr
    assert not (tmp_path / "r.db").exists()  # refused before the store is touched
