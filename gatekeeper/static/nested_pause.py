"""A process-wide switch shared by nested and concurrent users: the first to enter turns
it off, the last to leave puts back what was there. Used for the garbage collector
(collector_pause.py) and libcst's node validation (validation_pause.py)."""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Any, Callable, Iterator


class NestedPause:
    def __init__(self, pause: Callable[[], Any], resume: Callable[[Any], None]) -> None:
        # pause() turns the thing off and returns what resume() needs to put it back.
        self._pause, self._resume = pause, resume
        self._lock = threading.Lock()
        self._depth = 0
        self._saved: Any = None

    @contextmanager
    def __call__(self) -> Iterator[None]:
        with self._lock:
            if self._depth == 0:
                self._saved = self._pause()
            self._depth += 1
        try:
            yield
        finally:
            with self._lock:
                self._depth -= 1
                if self._depth == 0:
                    self._resume(self._saved)
