"""A checked file's syntax tree is freed by reference counting when the check ends, not
left in reference cycles for the garbage collector: a cycle that reaches the tree keeps
thousands of nodes alive, and the next collection traverses all of them (it made the
static stage's collections several times slower on real submissions)."""

import gc
from pathlib import Path

import libcst as cst

from gatekeeper.config import Config
from gatekeeper.static.problem_facts import load_problem_facts
from gatekeeper.static.stage import run_static

ROOT = Path(__file__).resolve().parent.parent
PROBLEMS = ROOT / "fixtures" / "problems"


def _nodes_left_in_cycles(paths: list[Path], problem: Path) -> dict[str, int]:
    config, facts = Config(), load_problem_facts(problem)
    for path in paths:  # warm: per-problem facts are kept on purpose
        run_static(path.read_bytes(), str(path), config, facts)
    left: dict[str, int] = {}
    was_on = gc.isenabled()
    gc.disable()
    gc.collect()
    # Everything alive now (the test process's whole heap) is left out of the collections
    # below, so each one scans only what that file's check made: same finding, a fraction
    # of the time under pytest, whose heap grows with every test before this one.
    gc.freeze()
    try:
        for path in paths:
            run_static(path.read_bytes(), str(path), config, facts)
            gc.set_debug(gc.DEBUG_SAVEALL)
            gc.collect()
            nodes = sum(isinstance(o, cst.CSTNode) for o in gc.garbage)
            if nodes:
                left[path.name] = nodes
            gc.set_debug(0)
            gc.garbage.clear()
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.unfreeze()
        if was_on:
            gc.enable()
    return left


def test_no_syntax_tree_is_left_to_the_collector():
    paths = sorted((ROOT / "fixtures" / "submissions").glob("*.py"))
    assert len(paths) > 50
    assert _nodes_left_in_cycles(paths, PROBLEMS / "seed_mean.py") == {}


def test_a_file_that_defines_and_calls_its_own_model_leaves_no_tree(tmp_path):
    # the own-class index (GK400/GK401) reads the file's top-level definitions
    source = tmp_path / "own.py"
    source.write_text(
        "import torch\n"
        "if True:\n    class Helper(torch.nn.Module):\n        def forward(self, x):\n            return x\n"
        "class Model(torch.nn.Module):\n    def forward(self, x):\n        return torch.mean(x, dim=1)\n"
        "class ModelNew(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.m = Model()\n    def forward(self, x):\n        return self.m(x)\n"
    )
    assert _nodes_left_in_cycles([source], PROBLEMS / "seed_mean.py") == {}
