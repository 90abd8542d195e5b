"""Test markers (registered in pyproject.toml): `slow` (sandboxes, subprocesses, builds),
`chromium` (headless Chromium), `gpu` (a CUDA GPU). `python -m pytest -m "not slow"` runs
the rule and static tests alone. Tests marked `gpu` are skipped where no CUDA GPU is visible.

A session that runs the run-mode fixture cases starts tests/warm_builds.py in the background
(lowest CPU priority) to compile their C++ extensions ahead of them; GATEKEEPER_TEST_WARM_BUILDS=0
turns it off. Under pytest-xdist each worker starts one and all but the first exit at once
(a lock in the build cache).

Slow tests are collected first (see pytest_collection_modifyitems): README's command runs
the suite on pytest-xdist workers, and the long tests must not be the last ones handed out."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Optional

import pytest

_WARMER: Optional[subprocess.Popen] = None


def _use_precompiled_header() -> None:
    """The suite's C++ builds use a precompiled torch/extension.h (gatekeeper/build/pch.py):
    about 12 s less CPU per cold build, ~50 builds on a fresh clone. One folder for the
    session, so that tests with a build cache of their own share it rather than each making
    one. `GATEKEEPER_PRECOMPILED_HEADER=0 python -m pytest` runs the suite without it."""
    from gatekeeper.build.cache import cache_root

    os.environ.setdefault("GATEKEEPER_PRECOMPILED_HEADER", "1")
    os.environ.setdefault("GATEKEEPER_PRECOMPILED_HEADER_DIR", str(cache_root() / "pch"))


_use_precompiled_header()


def _compile_bytecode() -> None:
    """Write gatekeeper's and the rule pack's bytecode once per session. With
    PYTHONDONTWRITEBYTECODE set (as on the development machine) a fresh clone has none, and
    every sandboxed worker (`python -I -B`, about 670 a run) and every CLI subprocess compiled
    the modules it imports from source again: 0.05 s of CPU a worker for the harness alone,
    0.02 s with bytecode. compileall writes regardless of that setting, skips what is up to
    date, and replaces files atomically, so xdist workers doing the same at once is harmless."""
    import compileall

    root = Path(__file__).resolve().parent.parent
    for folder in ("gatekeeper", "rules"):
        compileall.compile_dir(str(root / folder), quiet=2, workers=1)


_compile_bytecode()


def _has_cuda_gpu() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def pytest_configure(config: pytest.Config) -> None:
    # README's command (`-n 2`) hands tests out in batches fixed early (xdist's "load"): a
    # worker that drew the longer batch ran on alone while the other idled. Work stealing
    # lets an idle worker take half of the other's queue. An explicit --dist is kept.
    if getattr(config.option, "dist", "no") == "load" and not _explicit_dist(config.invocation_params.args):
        config.option.dist = "worksteal"


def _explicit_dist(args) -> bool:
    return any(str(a) == "--dist" or str(a).startswith(("--dist=", "-d")) for a in args)


def _work_stealing_workers(config: pytest.Config) -> int:
    """In a pytest-xdist worker under work stealing (README's `-n 2`): the number of workers.
    A worker's own options say `dist = "no"`; the controller's command line tells the mode."""
    workerinput = getattr(config, "workerinput", None)
    if not workerinput:
        return 0
    argv = [str(a) for a in workerinput.get("mainargv", [])]
    stealing = not _explicit_dist(argv) or "worksteal" in argv or "--dist=worksteal" in argv
    return int(workerinput.get("workercount", 0)) if stealing else 0


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: Optional[pytest.Item]):
    """`GATEKEEPER_TEST_TIMELINE=FILE` appends one line per test (worker, start, end, id), for
    measuring where a run's wall time goes (docs/figures.md, The test suite)."""
    path = os.environ.get("GATEKEEPER_TEST_TIMELINE")
    if not path:
        yield
        return
    import json
    import time

    start = time.time()
    yield
    line = json.dumps({"worker": os.environ.get("PYTEST_XDIST_WORKER", "main"), "start": round(start, 2),
                       "end": round(time.time(), 2), "test": item.nodeid})
    with open(path, "a", encoding="utf-8") as out:
        out.write(line + "\n")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Slow tests first, each group in its own order: under pytest-xdist (README's command) the
    # workers then end on the many short tests, not on a long one started last while the
    # other worker idles. A stable sort: the order within each group is the files' order.
    # The few `long` ones (minutes each) go before all others: longest first is what keeps two
    # workers from finishing minutes apart.
    items.sort(key=lambda item: 0 if item.get_closest_marker("long") else 1 if item.get_closest_marker("slow") else 2)
    workers = _work_stealing_workers(config)
    if workers > 1:
        items[:] = interleaved_for_work_stealing(items, workers)
    gpu_items = [item for item in items if item.get_closest_marker("gpu")]
    # Only look for a GPU (and import torch) when a gpu test was collected.
    if gpu_items and not _has_cuda_gpu():
        skip = pytest.mark.skip(reason="needs a CUDA GPU; none is visible on this machine")
        for item in gpu_items:
            item.add_marker(skip)


def interleaved_for_work_stealing(items: list, workers: int) -> list:
    """xdist's work stealing gives each worker one contiguous block of the list at the start
    (the first len // workers to one, and so on), and steals from the ends of the blocks. Dealt
    out like cards instead, block k is items[k::workers]: the long tests at the head of the
    list start on different workers at once, each block holds a fair share of the slow ones,
    and what is stolen is short. (On 2026-12-05 the plain order put all four long tests in
    the first block: one worker ran them back to back for 15 minutes.)"""
    return [item for k in range(workers) for item in items[k::workers]]


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start the build warm-up when the run-mode fixture cases are among the collected tests
    (a targeted run of other tests does not pay for compiles it will not use)."""
    global _WARMER
    if os.environ.get("GATEKEEPER_TEST_WARM_BUILDS", "1") == "0" or session.config.option.collectonly:
        return
    if not any(item.originalname == "test_run_fixture" for item in session.items if isinstance(item, pytest.Function)):
        return
    script = Path(__file__).with_name("warm_builds.py")
    # It makes the precompiled header at normal priority, then lowers itself to nice 19: the
    # fixture builds take only CPU time the tests leave idle, so they never slow a test down.
    _WARMER = subprocess.Popen([sys.executable, str(script)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, start_new_session=True)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """The warm-up ends with the session, done or not (its sandboxes die with it)."""
    global _WARMER
    warmer, _WARMER = _WARMER, None
    if warmer is None or warmer.poll() is not None:
        return
    try:
        os.killpg(warmer.pid, signal.SIGTERM)
        warmer.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(warmer.pid, signal.SIGKILL)
        warmer.wait(timeout=10)
    except ProcessLookupError:
        pass
