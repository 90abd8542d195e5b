"""Declared shapes as problem authors write them, and the fixed / free dimensions they imply.

shapes.py is read statically (constants, arithmetic, merges, comprehensions, loops); what a
static read cannot follow is reported as unknown, never refused. A dimension that every
declared shape holds at one size is fixed: not a problem size for the static rules, and
never jittered.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from gatekeeper.errors import InfrastructureError
from gatekeeper.problem.loaded import load_problem
from gatekeeper.problem.plan import plan_trials
from gatekeeper.problem.shapes_file import read_shapes_file

ROOT = Path(__file__).resolve().parent.parent
CASES = ROOT.parent / "shared" / "precision-cases"
CONSTANTS = {"T_TOTAL": 4096, "H": 2048, "I": 1024, "E": 64, "K": 8}

REFERENCE = '''import torch
import torch.nn as nn

BATCH = 2
SEQ = 1024
HEADS = 8
HEAD_DIM = {head_dim}


class Model(nn.Module):
    def forward(self, x):
        return x * 2


def get_inputs():
    return [torch.randn(BATCH, SEQ, HEADS, HEAD_DIM)]


def get_init_inputs():
    return []
'''


def _shapes(tmp_path: Path, text: str, constants: dict[str, int] = CONSTANTS):
    path = tmp_path / "shapes.py"
    path.write_text(text)
    return read_shapes_file(path, constants)


def _folder(tmp_path: Path, shapes: str, head_dim: int = 128) -> Path:
    folder = tmp_path / "prob"
    folder.mkdir()
    (folder / "reference.py").write_text(REFERENCE.format(head_dim=head_dim))
    (folder / "shapes.py").write_text(shapes)
    return folder


MOE = [{"T_TOTAL": 4096, "H": 2048, "I": 1024, "E": 64, "K": 8},
       {"T_TOTAL": 8192, "H": 2048, "I": 1024, "E": 256, "K": 8}]


@pytest.mark.parametrize("text", [
    # names bound to constants (two real problems' spelling)
    "E = 64\nH = 2048\nSHAPES = [{'T_total': 4096, 'H': H, 'I': 1024, 'E': E, 'K': 8},\n"
    "          {'T_total': 8192, 'H': H, 'I': 1024, 'E': 256, 'K': 8}]\n",
    # arithmetic, min/max, annotated and unpacked bindings
    "H, I = 2 * 1024, 2 ** 10\nK: int = max(4, 8)\nSHAPES = [dict(T_total=4 * 1024, H=H, I=I, E=128 // 2, K=K),\n"
    "          dict(T_total=8192, H=H, I=min(I, 4096), E=4 ** 4, K=K + 0 % 3)]\n",
    # a base dict merged
    "BASE = {'T_total': 4096, 'H': 2048, 'I': 1024, 'E': 64, 'K': 8}\n"
    "SHAPES = [BASE, {**BASE, 'T_total': BASE['T_total'] * 2, 'E': 256}]\n",
    # comprehensions over literal lists and ranges
    "SHAPES = [{'T_total': t, 'H': 2048, 'I': 1024, 'E': e, 'K': 8} for t, e in zip((4096, 8192), [64, 256])]\n",
    "SHAPES = [{'T_total': 4096 * (i + 1), 'H': 2048, 'I': 1024, 'E': 64 * 4 ** i, 'K': 8} for i in range(2) if i < 5]\n",
    # a dict of named shapes built by a dict comprehension
    "SHAPES = {name: {'T_total': t, 'H': 2048, 'I': 1024, 'E': e, 'K': 8}\n"
    "          for name, (t, e) in {'small': (4096, 64), 'large': (8192, 256)}.items()}\n",
    # a loop that appends, itertools.product
    "import itertools\nSHAPES = []\nfor t, e in itertools.product([4096], [64]):\n"
    "    SHAPES.append({'T_total': t, 'H': 2048, 'I': 1024, 'E': e, 'K': 8})\n"
    "SHAPES += [{'T_total': 8192, 'H': 2048, 'I': 1024, 'E': 256, 'K': 8}]\n",
    # a docstring, an unrelated import and a dtype that is not a size
    '"""Shapes."""\nimport torch\nSHAPES = [{"T_total": 4096, "H": 2048, "I": 1024, "E": 64, "K": 8, "dtype": torch.bfloat16},\n'
    '          {"T_total": 8192, "H": 2048, "I": 1024, "E": 256, "K": 8, "dtype": torch.bfloat16}]\n',
])
def test_shapes_py_spellings_read_statically(tmp_path, text):
    declared = _shapes(tmp_path, text)
    assert declared.complete, declared.unread
    assert list(declared.shapes) == MOE and declared.unknown == ()


def test_a_helper_function_of_the_file_is_followed(tmp_path):
    # round 14: a function of the file is read by the same evaluator (its body, its arguments)
    declared = _shapes(tmp_path, "def make(e):\n    return {'E': e, 'H': 2048}\n\nSHAPES = [make(64), make(256)]\n")
    assert declared.complete and declared.shapes == ({"E": 64, "H": 2048}, {"E": 256, "H": 2048})


def test_a_helper_function_call_is_unread_with_its_reason_not_refused(tmp_path):
    # `*args` is not followed: the call stays opaque, with its name and line
    declared = _shapes(tmp_path, "def make(*e):\n    return {'E': e[0], 'H': 2048}\n\nSHAPES = [make(64), make(256)]\n")
    assert not declared.complete and declared.shapes == ()
    assert "make" in declared.unread and "line 4" in declared.unread


def test_one_unknown_size_leaves_the_rest_read(tmp_path):
    declared = _shapes(tmp_path, "from sizes import experts\nSHAPES = [{'E': experts(), 'H': 2048}, {'E': 64, 'H': 4096}]\n")
    assert declared.shapes == ({"H": 2048}, {"E": 64, "H": 4096})
    assert declared.unknown == ("E",) and "sizes" in declared.unread


@pytest.mark.parametrize("text", [
    "X = 10 ** 10 ** 10\nSHAPES = [{'E': X}]\n",
    "SHAPES = [[0] * 10 ** 9]\n",
    "SHAPES = [{'E': e} for e in range(10 ** 12)]\n",
    "SHAPES = []\nwhile True:\n    SHAPES.append({'E': 1})\n",
    "N = sum(range(10 ** 12))\nSHAPES = [{'E': N}]\n",
    "SHAPES = [{'E': e} for a in range(10 ** 4) for b in range(10 ** 4) for e in [a * b]]\n",
    "SHAPES = [{'E': " + "1 + " * 900 + "1}]\n",  # deeper than the evaluator recurses
])
def test_hostile_shapes_files_are_unread_quickly(tmp_path, text):
    started = time.perf_counter()
    declared = _shapes(tmp_path, text)
    assert time.perf_counter() - started < 5
    assert declared.shapes == () or not declared.complete


def test_a_syntax_error_in_shapes_py_is_a_problem_error(tmp_path):
    with pytest.raises(InfrastructureError, match="does not parse"):
        _shapes(tmp_path, "SHAPES = [\n")


# --- fixed and free dimensions -------------------------------------------------------------

@pytest.mark.parametrize("folder,fixed,size,free", [
    ("prob_head_rmsnorm", {"HEAD_DIM": 128}, 128, {"BATCH", "SEQ", "HEADS"}),
    ("prob_group_absmax", {"GROUP": 128}, 128, {"ROWS", "COLS"}),
])
def test_precision_case_problems_have_their_fixed_dimension(folder, fixed, size, free):
    path = CASES / folder
    if not path.is_dir():
        pytest.skip(f"{path} is not in this checkout")
    facts = load_problem(path).facts
    assert facts.fixed_dims == fixed and set(facts.free_dims) == free
    assert facts.fixed_dim(size) is not None and "every declared shape" in facts.fixed_dim(size)
    assert facts.explain(size) is None and facts.explain_offset(size) is None  # not a problem size
    assert facts.explain(7 * size) is not None or facts.explain(4 * size) is not None  # free x fixed still is


def test_a_dimension_that_varies_or_disagrees_with_the_reference_is_free(tmp_path):
    shapes = ("SHAPES = [{'batch': 2, 'seq': 1024, 'heads': 8, 'head_dim': 128},"
              " {'batch': 1, 'seq': 4096, 'heads': 4, 'head_dim': 128}]\n")
    facts = load_problem(_folder(tmp_path, shapes, head_dim=64)).facts  # the reference says 64
    assert facts.fixed_dims == {} and facts.free_dims["HEAD_DIM"] == (64, 128)
    assert facts.explain(128) is not None and facts.fixed_dim(128) is None


def test_one_declared_shape_fixes_nothing(tmp_path):
    facts = load_problem(_folder(tmp_path, "SHAPES = [{'batch': 2, 'head_dim': 128}]\n")).facts
    assert facts.fixed_dims == {} and facts.explain(128) is not None


def test_a_fixed_size_that_a_free_dimension_also_takes_is_still_a_size(tmp_path):
    shapes = "SHAPES = [{'seq': 128, 'head_dim': 128}, {'seq': 1024, 'head_dim': 128}]\n"
    facts = load_problem(_folder(tmp_path, shapes)).facts
    assert facts.fixed_dims == {"HEAD_DIM": 128}
    assert facts.fixed_dim(128) is None and facts.explain(128) is not None


def test_the_jitter_planner_leaves_fixed_dimensions_alone():
    path = CASES / "prob_head_rmsnorm"
    if not path.is_dir():
        pytest.skip(f"{path} is not in this checkout")
    problem = load_problem(path)
    trials, constants = plan_trials(problem.source, problem.sidecar, 3, 4, 0.5, 1.5, canonical=problem.shapes)
    assert "HEAD_DIM" not in constants and "SEQ" in constants
    for trial in trials:
        for attempt in trial.attempts:
            assert "HEAD_DIM = 128" in attempt.source, trial.name


# --- the sidecar: fixed dimensions and declared shapes for single-file problems ---------------

def _single(tmp_path: Path, sidecar: str) -> Path:
    path = tmp_path / "heads.py"
    path.write_text(REFERENCE.format(head_dim=128))
    path.with_suffix(".toml").write_text(sidecar)
    return path


def test_sidecar_fixed_dimensions_for_a_kernelbench_file(tmp_path):
    problem = load_problem(_single(tmp_path, '[shapes]\nfixed = ["HEAD_DIM"]\n'))
    assert problem.facts.fixed_dims == {"HEAD_DIM": 128} and problem.facts.fixed_dim(128)
    _, constants = plan_trials(problem.source, problem.sidecar, 1, 3, 0.5, 1.5)
    assert "HEAD_DIM" not in constants and "SEQ" in constants


def test_sidecar_declared_shapes_imply_fixed_dimensions(tmp_path):
    sidecar = "[shapes]\ndeclared = [{ seq = 1024, head_dim = 128 }, { seq = 4096, head_dim = 128 }]\n"
    problem = load_problem(_single(tmp_path, sidecar))
    assert problem.shapes == ({"SEQ": 1024, "HEAD_DIM": 128}, {"SEQ": 4096, "HEAD_DIM": 128})
    assert problem.facts.fixed_dims == {"HEAD_DIM": 128} and problem.facts.free_dims == {"SEQ": (1024, 4096)}


@pytest.mark.parametrize("sidecar,match", [
    ('[shapes]\nfixed = ["HEAD_WIDTH"]\n', "not an integer constant"),
    ('[shapes]\nfixed = ["SEQ"]\ndeclared = [{ seq = 1024 }, { seq = 4096 }]\n', "size it 1024, 4096"),
    ('[shapes]\nfixd = ["SEQ"]\n', "unknown key 'shapes.fixd'"),
    ('[shapes]\nfixed = ["HEAD_DIM"]\n[jitter]\nranges = { HEAD_DIM = [64, 256] }\n', "never jittered"),
])
def test_sidecar_shapes_mistakes_are_problem_errors_that_say_how_to_fix(tmp_path, sidecar, match):
    with pytest.raises(InfrastructureError, match=match):
        load_problem(_single(tmp_path, sidecar))


def test_a_jitter_range_in_the_sidecar_keeps_an_inferred_dimension_free(tmp_path):
    folder = _folder(tmp_path, "SHAPES = [{'seq': 1024, 'head_dim': 128}, {'seq': 4096, 'head_dim': 128}]\n")
    (folder / "reference.toml").write_text("[jitter]\nranges = { HEAD_DIM = [64, 256] }\n")
    problem = load_problem(folder)
    assert problem.facts.fixed_dims == {} and problem.facts.free_dims["HEAD_DIM"] == (128,)
    _, jittered = plan_trials(problem.source, problem.sidecar, 1, 3, 0.5, 1.5, canonical=problem.shapes)
    assert "HEAD_DIM" in jittered
