"""The static stage pauses Python's cyclic garbage collector for one file and always gives
it back as it found it: on, off, nested, and when the stage raises."""

from __future__ import annotations

import gc

import pytest

from gatekeeper.config import Config
from gatekeeper.static.collector_pause import collector_paused
from gatekeeper.static.stage import run_static

SOURCE = b"import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x * 2\n"


@pytest.fixture(autouse=True)
def _restore_gc():
    was = gc.isenabled()
    yield
    gc.enable() if was else gc.disable()


def test_the_stage_runs_with_the_collector_off_and_turns_it_back_on():
    seen = []
    gc.enable()
    with collector_paused():
        seen.append(gc.isenabled())
    run_static(SOURCE, "s.py", Config(), None)
    assert seen == [False] and gc.isenabled()


def test_a_collector_that_was_off_stays_off():
    gc.disable()
    run_static(SOURCE, "s.py", Config(), None)
    assert not gc.isenabled()


def test_nested_pauses_end_with_the_outermost_and_an_exception_restores():
    gc.enable()
    with pytest.raises(RuntimeError):
        with collector_paused():
            with collector_paused():
                pass
            assert not gc.isenabled()  # the inner pause ended; the outer one still holds
            raise RuntimeError("a rule failed")
    assert gc.isenabled()


def test_a_checked_file_leaves_no_trees_or_token_cycles_for_the_collector():
    # What survives a file is traversed by the next collection: the stdlib ast tree kept
    # for positions, and C++ tokens held in a source <-> roles cycle, used to cost ~8% of
    # the stage on real submissions.
    from pathlib import Path

    from gatekeeper.static import python_ast
    from gatekeeper.static.problem_facts import load_problem_facts

    fixtures = Path(__file__).resolve().parent.parent / "fixtures"
    data = (fixtures / "submissions/shape_honest_cuda_tiled_matmul.py").read_bytes()
    problem = load_problem_facts(fixtures / "problems/shape_matmul.py")  # the size rules read C++ roles
    run_static(data, "warm.py", Config(), problem)
    gc.collect()
    gc.disable()
    run_static(data, "s.py", Config(), problem)
    assert python_ast._last == (None, None)
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        gc.collect()
        left = [type(o).__name__ for o in gc.garbage]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    assert "Token" not in left and "CppSource" not in left, sorted(set(left))
    assert len(left) < 100, sorted(set(left))
