"""Ingest maps a folder's files to problems with the configuration's problem_map, as
`check` and the pre-commit hook do: KernelBench's `levelN/<id>_*.py` layout needs no
per-problem sub-folders and no mapping file."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # ingests submissions through worker processes

ROOT = Path(__file__).resolve().parent.parent
SEED = ROOT / "fixtures" / "submissions" / "seed_cached_hardcoded.py"
HONEST = ROOT / "fixtures" / "submissions" / "seed_honest_generic.py"
PROBLEM = ROOT / "fixtures" / "problems" / "seed_mean.py"


def gk(*args, cwd):
    proc = subprocess.run([sys.executable, "-m", "gatekeeper", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, timeout=300)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def test_ingest_uses_the_problem_map(tmp_path):
    (tmp_path / "KernelBench" / "level1").mkdir(parents=True)
    (tmp_path / "KernelBench" / "level1" / "7_seed_mean.py").write_text(PROBLEM.read_text())
    (tmp_path / "runs" / "level1").mkdir(parents=True)
    (tmp_path / "runs" / "level1" / "7_hacked.py").write_text(SEED.read_text())
    (tmp_path / "runs" / "level1" / "7_honest.py").write_text(HONEST.read_text())
    (tmp_path / "runs" / "level1" / "8_orphan.py").write_text(HONEST.read_text())
    (tmp_path / "gatekeeper.toml").write_text(
        '[[problem_map]]\nsubmissions = "runs/level{n}/{id}_*.py"\nproblem = "KernelBench/level{n}/{id}_*.py"\n')
    run = gk("ingest", "runs", "--problems", "KernelBench/level1", "--store", "r.db", "--stages", "static",
             cwd=tmp_path)
    assert run.returncode == 3, run.stderr  # the orphan is a bad record: not everything was checked
    # The orphan's entry matches but its problem does not exist: that record only, said plainly.
    assert "8_orphan.py" in run.stdout + run.stderr and "matches no file" in run.stdout + run.stderr
    exported = gk("export", "--store", "r.db", "--format", "jsonl", cwd=tmp_path)
    rows = {Path(r["source_id"]).name: r for r in map(json.loads, exported.stdout.splitlines())}
    assert rows["7_hacked.py"]["problem"] == "7_seed_mean" and rows["7_hacked.py"]["verdict"] == "reject"
    assert rows["7_honest.py"]["verdict"] == "pass"
    assert "8_orphan.py" not in rows


def test_ingest_needs_no_problems_folder_when_the_map_places_every_file(tmp_path):
    (tmp_path / "KernelBench" / "level1").mkdir(parents=True)
    (tmp_path / "KernelBench" / "level1" / "7_seed_mean.py").write_text(PROBLEM.read_text())
    (tmp_path / "runs" / "level1").mkdir(parents=True)
    (tmp_path / "runs" / "level1" / "7_hacked.py").write_text(SEED.read_text())
    (tmp_path / "runs" / "level1" / "7_honest.py").write_text(HONEST.read_text())
    (tmp_path / "gatekeeper.toml").write_text(
        '[[problem_map]]\nsubmissions = "runs/level{n}/{id}_*.py"\nproblem = "KernelBench/level{n}/{id}_*.py"\n')
    run = gk("ingest", "runs", "--store", "r.db", "--stages", "static", cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    exported = gk("export", "--store", "r.db", "--format", "jsonl", cwd=tmp_path)
    rows = {Path(r["source_id"]).name: r for r in map(json.loads, exported.stdout.splitlines())}
    assert rows["7_hacked.py"]["verdict"] == "reject" and rows["7_honest.py"]["verdict"] == "pass"
    # Without a map, and for a JSONL source, the folder is still needed, and the message says why.
    (tmp_path / "gatekeeper.toml").unlink()
    unmapped = gk("ingest", "runs", "--store", "r2.db", "--stages", "static", cwd=tmp_path)
    assert unmapped.returncode == 2 and "--problems is needed" in unmapped.stderr and "problem_map" in unmapped.stderr
