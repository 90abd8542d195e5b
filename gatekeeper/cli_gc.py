"""The cyclic garbage collector and the exit of a `gatekeeper check` process (issue 20 item 8).

Start-up (typer, pydantic, libcst's node classes, the rules) leaves ~10^5 long-lived objects
that every full collection traverses again: a full collection of a 1,000-file run took
60-80 ms, and the collections during the imports ~25 ms more, about 2% of the run, all of it
spent re-proving that modules and classes are alive. So the check command keeps the
collector off until the first report is out (imports done, rules loaded, the first problem
read), then moves everything alive into the permanent generation (`gc.freeze`) and turns
the collector back on: later collections traverse only what the checks allocate, and young
collections run every YOUNG_THRESHOLD allocations (see frozen_after_first).

The same process skips the interpreter's teardown once a check command has returned
(`exit_now`): freeing every object one by one (the reports, each problem's facts, the rule
classes, libcst's node classes) and a last full collection took ~0.15 s of a 1,000-file run,
and nothing in them is output. As mypy does, it flushes the standard streams, runs the
`atexit` handlers (progress line, temporary folders, logging) and leaves with `os._exit`,
only when no thread but daemons is left to join.

Only the CLI does this, never the library (`gatekeeper.api`): freezing a caller's objects
would keep their garbage cycles for the life of the process. What start-up itself left in
cycles (a few hundred objects) is kept for the life of the process; nothing else changes.
"""

from __future__ import annotations

import atexit
import gc
import os
import sys
import threading
from contextlib import contextmanager
from typing import Iterable, Iterator, TypeVar

T = TypeVar("T")
YOUNG_THRESHOLD = 100_000  # allocations between young collections once start-up is frozen

# Set by `gatekeeper.cli.main` (the console script, `python -m gatekeeper`): the process is
# gatekeeper's own. In-process callers (tests through typer's runner, the library) are left alone.
_state = {"own_process": False, "paused": False}


def own_process() -> None:
    _state["own_process"] = True


@contextmanager
def collector_off_until_frozen() -> Iterator[None]:
    """In gatekeeper's own process, the collector off for the block unless
    `frozen_after_first` turned it on earlier; restored on the way out, however it ends."""
    if not _state["own_process"] or not gc.isenabled():
        yield
        return
    gc.disable()
    _state["paused"] = True
    try:
        yield
    finally:
        if _state["paused"]:
            _state["paused"] = False
            gc.enable()


def _resume_in_child() -> None:
    """A process forked while the collector is paused (the `--jobs` pool starts before the
    first report) gets it back on: its checks must not run without one for good."""
    if _state["paused"]:
        _state["paused"] = False
        gc.enable()


os.register_at_fork(after_in_child=_resume_in_child)


def frozen_after_first(items: Iterable[T]) -> Iterator[T]:
    """`items`; once the first has been produced, and only where `collector_off_until_frozen`
    turned the collector off, freeze what is alive and turn the collector back on."""
    for item in items:
        yield item
        if _state["paused"]:
            _state["paused"] = False
            gc.freeze()
            # Young collections every 100,000 allocations rather than 700: each file's checks run
            # with the collector paused (static/collector_pause.py) and leave its count far past
            # 700, so nearly every file started one over what the file kept, and every tenth a
            # middle one (~0.13 s of a 1,000-file run). What a file leaves in cycles is a few
            # hundred objects, so a young collection every few files keeps memory as flat.
            gc.set_threshold(YOUNG_THRESHOLD, *gc.get_threshold()[1:])
            gc.enable()


def check_finished() -> None:
    """A check command returned: its process may leave without teardown (`exit_now`)."""
    _state["check_finished"] = True


def exit_now(code: int) -> None:
    """In gatekeeper's own process after a check, leave with `code` without the interpreter's
    teardown; otherwise return (the caller exits as usual)."""
    if not (_state["own_process"] and _state.get("check_finished")):
        return
    main = threading.main_thread()
    if any(t is not main and not t.daemon and t.is_alive() for t in threading.enumerate()):
        return  # a thread the interpreter would join: let it
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # OSError, ValueError, term.PipeClosed (not an OSError)
            return  # a closed or broken stream: the normal exit path reports it as before
    os._exit(code)
