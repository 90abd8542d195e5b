"""One Problem per check: formats (KernelBench, seed, KernelBench-Hard), side files,
tolerance defaults, load errors with their exit codes, and the same object in every stage."""

from __future__ import annotations

import json
import subprocess
import sys
import types
from importlib.machinery import ModuleSpec
from pathlib import Path

import libcst as cst
import pytest

import gatekeeper
from gatekeeper.config import Config
from gatekeeper.errors import InfrastructureError, UsageError
from gatekeeper.problem.formats import ProblemFormat
from gatekeeper.problem.loaded import load_problem
from gatekeeper.problem.mapping import is_problem_file, map_problem
from gatekeeper.problem.plan import plan_trials
from gatekeeper.problem.shapes_file import read_shapes_file

ROOT = Path(__file__).resolve().parent.parent
PROBLEMS = ROOT / "fixtures" / "problems"
HARD = PROBLEMS / "kbhard_softmax"

REFERENCE = '''import torch
import torch.nn as nn

M = 64
N = 32


class Model(nn.Module):
    def forward(self, x):
        return x * 2


def get_inputs():
    return [torch.randn(M, N)]


def get_init_inputs():
    return []
'''


def _hard_folder(tmp_path: Path, yaml: str = "", shapes: str = "SHAPES = [{'m': 64, 'n': 32}, {'m': 7, 'n': 100}]\n",
                 sidecar: str = "") -> Path:
    folder = tmp_path / "01_double"
    folder.mkdir()
    (folder / "reference.py").write_text(REFERENCE)
    (folder / "shapes.py").write_text(shapes)
    (folder / "problem.yaml").write_text(yaml or "name: 01_double\n")
    if sidecar:
        (folder / "reference.toml").write_text(sidecar)
    return folder


def _cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gatekeeper", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=600)


# --- formats -------------------------------------------------------------------------------

def test_kernelbench_hard_folder_and_its_reference_file_load_the_same_problem():
    by_folder = load_problem(HARD)
    by_file = load_problem(HARD / "reference.py")
    for problem in (by_folder, by_file):
        assert problem.format == ProblemFormat.KERNELBENCH_HARD
        assert problem.entry == "Model" and problem.facts.entry == "Model"
        assert problem.name == "kbhard_softmax" and problem.folder == HARD
        assert problem.shapes == ({"BATCH": 8, "VOCAB": 1000}, {"BATCH": 3, "VOCAB": 4099},
                                  {"BATCH": 33, "VOCAB": 257})  # `extreme: True` is not a size
        assert problem.sidecar.device == "cpu"  # reference.toml beside reference.py still applies
        assert "torch.softmax" in problem.facts.declared_forbidden
    assert by_folder.ref().path == str(HARD)


def test_other_formats_keep_model_new_and_are_told_apart():
    kb = load_problem(PROBLEMS / "cpu_mean.py")
    seed = load_problem(PROBLEMS / "seed_mean.py")
    assert (kb.format, kb.entry, kb.shapes) == (ProblemFormat.KERNELBENCH, "ModelNew", ())
    assert (seed.format, seed.entry) == (ProblemFormat.SEED, "ModelNew")


def test_every_canonical_shape_is_a_problem_size_for_the_static_rules():
    facts = load_problem(HARD).facts
    assert {8, 1000, 3, 4099, 33, 257} <= facts.dims
    assert facts.explain(4099) is not None and facts.explain(33 * 257) is not None
    assert load_problem(PROBLEMS / "cpu_mean.py").facts.explain(4099) is None


@pytest.mark.parametrize("text,expected", [
    ("SHAPES = {'small': {'M': 7, 'N': 9}, 'large': {'m': 640, 'n': 320}}\n", [{"M": 7, "N": 9}, {"M": 640, "N": 320}]),
    ("shapes: list = [{'m': 7}]\n", [{"M": 7}]),
    ("SHAPES = {'m': 7, 'n': 9, 'dtype': 'fp32'}\n", [{"M": 7, "N": 9}]),
    ("SHAPES = [{'k': 7}, {'m': 0}]\n", []),  # no constant named k; a size of 0 is not a size
])
def test_shapes_py_variants(tmp_path, text, expected):
    path = tmp_path / "shapes.py"
    path.write_text(text)
    declared = read_shapes_file(path, {"M": 64, "N": 32})
    assert list(declared.shapes) == expected and declared.complete


# --- tolerances ----------------------------------------------------------------------------

def test_tolerance_defaults_follow_the_problem_format(tmp_path):
    kb = load_problem(PROBLEMS / "shape_matmul.py")
    assert kb.tolerance("float32") == (1e-2, 1e-2)  # KernelBench's own atol = rtol = 1e-2
    hard = load_problem(_hard_folder(tmp_path))
    assert hard.tolerance("float32") == (1e-4, 1e-4)  # KernelBench-Hard's src/eval/correctness.py
    assert hard.tolerance("float8_e4m3fn") == (1e-1, 1e-1)


def test_problem_yaml_tolerance_forms_and_the_sidecar_wins(tmp_path):
    yaml = ('tolerance:\n  "torch.float32": {"atol": 1.0e-5, "rtol": 2.0e-5}\n  fp16: 0.05\n'
            'forbidden:\n  - "torch.nn.functional.linear"\n')
    hard = load_problem(_hard_folder(tmp_path, yaml=yaml, sidecar="[tolerances.float16]\natol = 0.1\nrtol = 0.2\n"))
    assert hard.tolerance("float32") == (1e-5, 2e-5)
    assert hard.tolerance("float16") == (0.1, 0.2)  # reference.toml over problem.yaml
    assert hard.facts.declared_forbidden == ("torch.nn.functional.linear",)
    assert load_problem(HARD).tolerance("float32") == (1e-5, 1e-5)


@pytest.mark.parametrize("yaml,match", [
    ("forbidden: torch.softmax\n", "must be a list"),
    ("tolerance:\n  float32: [1, 2]\n", "tolerance for 'float32'"),
    ("- just\n- a list\n", "must be a YAML mapping"),
    ("name: [unclosed\n", "not valid YAML"),
])
def test_broken_problem_yaml_is_a_problem_error(tmp_path, yaml, match):
    with pytest.raises(InfrastructureError, match=match):
        load_problem(_hard_folder(tmp_path, yaml=yaml))


# --- jitter from shapes.py -----------------------------------------------------------------

def test_canonical_shapes_become_trials_besides_the_jittered_ones():
    problem = load_problem(HARD)
    trials, constants = plan_trials(problem.source, problem.sidecar, 7, 3, 0.5, 1.5, canonical=problem.shapes)
    names = [t.name for t in trials]
    assert names[:5] == ["nominal", "nominal-second", "nominal-overwrite", "jitter-shape-1", "jitter-shape-2"]
    assert len(names) == 8 and constants == {"BATCH": 8, "VOCAB": 1000}
    second = trials[3].attempts[0]
    assert second.constants == {"BATCH": 3, "VOCAB": 4099}
    module = cst.parse_module(second.source)
    assert "BATCH = 3" in module.code and "VOCAB = 4099" in module.code and "BATCH = 8" not in module.code


# --- where problems come from: --problem, the problem map ----------------------------------

def test_problem_map_accepts_kernelbench_hard_folders(tmp_path):
    problems = tmp_path / "problems"
    problems.mkdir()
    folder = _hard_folder(problems)
    (folder / "solution.py").write_text("class Model: pass\n")
    (tmp_path / "gatekeeper.toml").write_text('[[problem_map]]\nsubmissions = "problems/{p}/solution.py"\n'
                                             'problem = "problems/{p}"\n')
    from gatekeeper.config import load_config

    config = load_config(search_from=folder / "solution.py")
    assert map_problem(folder / "solution.py", config) == folder
    assert is_problem_file(folder / "reference.py", config) and is_problem_file(folder / "shapes.py", config)
    assert not is_problem_file(folder / "solution.py", config)


@pytest.mark.slow
def test_cli_checks_a_kernelbench_hard_folder_unmodified():
    out = _cli("check", str(HARD / "solution.py"), "--problem", str(HARD), "--static-only", "-f", "json")
    report = json.loads(out.stdout)
    assert out.returncode == 0, out.stdout + out.stderr
    assert report["problem"]["name"] == "kbhard_softmax" and report["verdict"] == "pass"


def test_a_model_new_against_a_kernelbench_hard_problem_names_the_entry_it_needs():
    code = "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x\n"
    report = gatekeeper.check_static(code, HARD)
    assert [f.rule for f in report.errors()] == ["GK005"]
    assert "defines no `Model`" in report.errors()[0].message


# --- load errors: reported once, with the right exit code ----------------------------------

@pytest.mark.slow
def test_missing_problem_paths_are_usage_errors(tmp_path):
    for path in (tmp_path / "nope.py", tmp_path):  # tmp_path: a folder without reference.py
        with pytest.raises(UsageError):
            load_problem(path)
    out = _cli("check", str(HARD / "solution.py"), "--problem", str(tmp_path / "nope.py"), "--static-only")
    assert out.returncode == 2 and "problem file not found" in " ".join(out.stderr.split())
    out = _cli("check", str(HARD / "solution.py"), "--problem", str(tmp_path), "--static-only")
    assert out.returncode == 2 and "has no reference.py" in " ".join(out.stderr.split())  # stderr wraps


def test_a_problem_that_does_not_parse_is_exit_3_with_the_line(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import torch\ndef get_inputs(:\n    pass\n")
    out = _cli("check", str(HARD / "solution.py"), "--problem", str(bad), "--static-only", "-f", "json")
    assert out.returncode == 3
    assert "does not parse (line" in json.loads(out.stdout)["error"]


@pytest.mark.slow
def test_static_only_against_a_problem_that_lacks_a_name_is_an_error_without_running_it(tmp_path):
    """Issue 12 row 13: this was exit 0. The names are read statically (issue 21: --static-only
    runs no code, not even the problem's)."""
    problem = tmp_path / "broken.py"
    problem.write_text(REFERENCE.replace("def get_init_inputs", "def _init_inputs") + "open('ran', 'w')\n")
    submission = ROOT / "fixtures" / "submissions" / "cpu_honest_cpp.py"
    out = _cli("check", str(submission), "--problem", str(problem), "--static-only", "-f", "json", cwd=tmp_path)
    report = json.loads(out.stdout)
    assert out.returncode == 3, out.stdout + out.stderr
    assert report["verdict"] == "error" and "defines no get_init_inputs" in report["error"]
    assert str(problem) in report["error"] and not (tmp_path / "ran").exists()


def test_static_only_never_runs_the_problem(tmp_path):
    """A problem that raises at import is found by the stages that import it; static-only reads it."""
    problem = tmp_path / "raises.py"
    problem.write_text(REFERENCE + "open('ran', 'w')\nraise ImportError('needs a package this machine lacks')\n")
    submission = ROOT / "fixtures" / "submissions" / "cpu_honest_cpp.py"
    for report in (gatekeeper.check(submission, problem, stages="static"), gatekeeper.check_static(submission, problem)):
        assert report.verdict.value == "pass", report.error
    assert not (tmp_path / "ran").exists() and not (ROOT / "ran").exists()


# --- the same Problem object in every stage ------------------------------------------------

def test_every_stage_receives_the_one_loaded_problem(monkeypatch):
    from gatekeeper import pipeline
    from gatekeeper.report import StageName, StageStatus
    from gatekeeper.stages import RunOptions, StageOutcome, Submission

    seen: list[object] = []

    def probe(submission, problem, config, options, findings):
        seen.append(problem)
        return StageOutcome(StageStatus.PASSED)

    module = types.ModuleType("gk_test_stage_probe")
    module.__spec__ = ModuleSpec("gk_test_stage_probe", None)
    module.run = probe  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "gk_test_stage_probe", module)
    for name in (StageName.BUILD, StageName.BEHAVIOUR):
        monkeypatch.setitem(pipeline.STAGE_RUNNERS, name, "gk_test_stage_probe:run")
    data = (HARD / "solution.py").read_bytes()
    report = pipeline.run(Submission(str(HARD / "solution.py"), data), HARD, Config(), RunOptions())
    assert report.verdict.value == "pass", report.error
    assert len(seen) == 2 and seen[0] is seen[1] and seen[0].format == ProblemFormat.KERNELBENCH_HARD


def test_ingest_problems_folder_holds_kernelbench_hard_folders(tmp_path):
    from gatekeeper.ingest.problems import load_problems

    folder = _hard_folder(tmp_path)
    (tmp_path / "plain.py").write_text(REFERENCE)
    found = load_problems(tmp_path)
    assert sorted(found) == ["01_double", "plain"]
    assert found["01_double"].path == folder.resolve()
    before = found["01_double"].sha256
    (folder / "problem.yaml").write_text("name: 01_double\ntolerance:\n  fp32: 0.001\n")
    assert load_problems(tmp_path)["01_double"].sha256 != before  # stored results follow problem.yaml
    (tmp_path / "01_double.py").write_text(REFERENCE)
    with pytest.raises(UsageError, match="both"):
        load_problems(tmp_path)


@pytest.mark.slow
def test_submissions_only_keeps_a_kernelbench_hard_solution_and_skips_its_reference(tmp_path):
    folder = _hard_folder(tmp_path)
    (folder / "solution.py").write_text((HARD / "solution.py").read_text())
    (tmp_path / "gatekeeper.toml").write_text('[[problem_map]]\nsubmissions = "{p}/solution.py"\nproblem = "{p}"\n')
    out = _cli("check", str(folder), "--submissions-only", "--static-only", "-f", "json", cwd=tmp_path)
    reports = json.loads(out.stdout)
    assert out.returncode == 0, out.stdout + out.stderr
    assert [Path(r["submission"]["path"]).name for r in reports] == ["solution.py"]
    assert reports[0]["problem"]["name"] == "01_double"


