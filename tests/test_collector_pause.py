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
