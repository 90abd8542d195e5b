"""shapes.py that only running it can read: a note (GK007) under --static-only, the sandboxed
worker for the stages that run code, and never a refusal for the way the shapes are spelled."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gatekeeper.config import Config
from gatekeeper.errors import InfrastructureError
from gatekeeper.problem.loaded import load_problem
from gatekeeper.problem.plan import plan_trials
from gatekeeper.problem.shapes_worker import resolve_shapes

pytestmark = pytest.mark.slow  # starts sandboxed workers and the CLI

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = '''import torch
import torch.nn as nn

SEQ = 1024
HEAD_DIM = 128


class Model(nn.Module):
    def forward(self, x):
        return x * 2


def get_inputs():
    return [torch.randn(SEQ, HEAD_DIM)]


def get_init_inputs():
    return []
'''
# A helper function: a static read cannot follow it, running the file can.
HELPER_SHAPES = '''def _shape(*dims):  # `*args`: a helper the static read does not follow (round 14)
    return {"SEQ": dims[0], "HEAD_DIM": 128}


SHAPES = [_shape(s) for s in (1024, 4096)]
'''
SUBMISSION = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x * 2
'''


def _folder(tmp_path: Path, shapes: str) -> Path:
    folder = tmp_path / "heads"
    folder.mkdir()
    (folder / "reference.py").write_text(REFERENCE)
    (folder / "shapes.py").write_text(shapes)
    (folder / "solution.py").write_text(SUBMISSION)
    return folder


def test_static_read_leaves_the_helper_unknown_and_the_worker_reads_it(tmp_path):
    problem = load_problem(_folder(tmp_path, HELPER_SHAPES))
    assert problem.shapes == () and "_shape" in problem.shapes_unread
    assert problem.facts.fixed_dims == {} and problem.facts.shapes_unread == problem.shapes_unread

    resolved = resolve_shapes(problem, Config())
    assert resolved.shapes == ({"SEQ": 1024, "HEAD_DIM": 128}, {"SEQ": 4096, "HEAD_DIM": 128})
    assert resolved.shapes_unread is None and resolved.facts.shapes_unread is None
    assert resolved.facts.fixed_dims == {"HEAD_DIM": 128} and resolved.facts.free_dims == {"SEQ": (1024, 4096)}
    _, jittered = plan_trials(resolved.source, resolved.sidecar, 1, 3, 0.5, 1.5, canonical=resolved.shapes)
    assert "HEAD_DIM" not in jittered and "SEQ" in jittered
    assert resolve_shapes(problem, Config()) is resolved  # once per problem in a batch


def test_a_shapes_py_that_imports_its_reference_is_read_by_the_worker(tmp_path):
    shapes = "from reference import SEQ, HEAD_DIM\nSHAPES = [{'SEQ': SEQ, 'HEAD_DIM': HEAD_DIM}, {'SEQ': 2 * SEQ}]\n"
    problem = load_problem(_folder(tmp_path, shapes))
    assert problem.facts.unknown_dims == ("SEQ", "HEAD_DIM") and problem.shapes == ()
    resolved = resolve_shapes(problem, Config())
    assert resolved.shapes == ({"SEQ": 1024, "HEAD_DIM": 128}, {"SEQ": 2048})
    assert resolved.facts.fixed_dims == {"HEAD_DIM": 128}  # the second shape keeps the reference's 128


def test_a_shapes_py_that_raises_when_run_is_a_problem_error_with_its_line(tmp_path):
    problem = load_problem(_folder(tmp_path, "def f():\n    raise ValueError('no')\n\nSHAPES = [f()]\n"))
    with pytest.raises(InfrastructureError, match=r"raises ValueError when run \(line 2\)"):
        resolve_shapes(problem, Config())


def test_static_only_says_which_dimensions_are_unknown_and_does_not_refuse(tmp_path):
    shapes = "from sizes import long_seq\nSHAPES = [{'SEQ': 1024, 'HEAD_DIM': 128}, {'SEQ': long_seq(), 'HEAD_DIM': 128}]\n"
    folder = _folder(tmp_path, shapes)
    out = subprocess.run([sys.executable, "-m", "gatekeeper", "check", str(folder / "solution.py"), "--problem",
                          str(folder), "--static-only", "-f", "json"], capture_output=True, text=True, cwd=tmp_path,
                         timeout=300)
    report = json.loads(out.stdout)
    assert report["verdict"] != "error", report
    notes = [f for f in report["findings"] if f["rule"] == "GK007"]
    assert len(notes) == 1 and notes[0]["severity"] == "info"
    assert "SEQ" in notes[0]["message"] and "long_seq" in notes[0]["message"] and "shapes.py" in notes[0]["message"]


def test_the_pipeline_reads_unread_shapes_only_in_runs_that_run_code(tmp_path):
    """The same problem: --static-only notes it (no code runs); a full check runs shapes.py in
    the worker, where this one raises: a problem error naming the file and line."""
    folder = _folder(tmp_path, "def f():\n    raise ValueError('no sizes here')\n\nSHAPES = [f()]\n")
    base = [sys.executable, "-m", "gatekeeper", "check", str(folder / "solution.py"), "--problem", str(folder),
            "-f", "json"]
    static = subprocess.run([*base, "--static-only"], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    report = json.loads(static.stdout)
    assert report["verdict"] != "error" and "GK007" in {f["rule"] for f in report["findings"]}, report
    full = subprocess.run(base, capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert full.returncode == 3, full.stdout[-2000:] + full.stderr[-2000:]
    error = json.loads(full.stdout)["error"]
    assert "shapes.py raises ValueError when run (line 2)" in error and "no sizes here" in error
