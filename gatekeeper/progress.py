"""One status line on a terminal while `gatekeeper check` works (issue 21, item 2): the file,
the stage, what it is doing (the extension being compiled, trial k of n) and the elapsed
time, redrawn every second so that a 40 s cold check is never silent.

Off unless the CLI turns it on (`start_for_check`): stderr must be a terminal and the
output text without -q, so pipes, logs, JSON and the MCP server see nothing. The stages
call `begin`, `stage`, `step` and `phase`; each is a no-op when off, and in any process but
the one that turned it on (a --jobs worker forked from it inherits the switch, not the line).
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import threading
import time
from typing import Any, Iterable, Optional, TextIO

_CLEAR = "\r\x1b[2K"  # carriage return, erase the line


class _Line:
    def __init__(self, stream: TextIO, total: int) -> None:
        self.stream, self.total = stream, total
        self.pid = os.getpid()
        self.lock = threading.Lock()
        self.files = 0
        self.file = ""
        self.started = time.monotonic()
        self.stage = self.step = self.detail = ""
        self.trials: list[str] = []  # the trial names the current step runs
        self.labels: list[str] = []  # those seen so far, in order
        self.shown = False
        self.drawn = 0.0
        self.stop = threading.Event()
        self.ticker = threading.Thread(target=self._tick, name="gatekeeper-progress", daemon=True)

    def _tick(self) -> None:
        while not self.stop.wait(1.0):  # the elapsed time moves during a long compile
            with self.lock:
                if self.shown:
                    self._draw()

    def _draw(self, throttle: bool = False) -> None:
        now = time.monotonic()
        if throttle and self.shown and now - self.drawn < 0.1:
            return  # hundreds of schedule calls a second: the terminal need not see each one
        self.drawn = now
        # The elapsed time first: a narrow terminal cuts the end of the line, never the clock.
        parts = [f"gatekeeper [{now - self.started:.0f} s] {self.file}" +
                 (f" ({self.files}/{self.total})" if self.total > 1 else "")]
        parts += [p for p in (self.stage, self.step, self.detail) if p]
        text = " · ".join(parts)
        width = _columns(self.stream) - 1
        if len(text) > width:
            text = text[:max(width - 1, 0)] + "…"
        try:
            self.stream.write(_CLEAR + text)
            self.stream.flush()
        except (OSError, ValueError):  # a closed or broken terminal: stop drawing, never fail the check
            self.stop.set()
        self.shown = True

    def erase(self) -> None:
        if self.shown:
            try:
                self.stream.write(_CLEAR)
                self.stream.flush()
            except (OSError, ValueError):
                pass
            self.shown = False


_line: Optional[_Line] = None


def _columns(stream: TextIO) -> int:
    """The width of the terminal the line goes to (stderr's, not stdout's: stdout may be a pipe)."""
    try:
        columns = os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, OSError, ValueError):
        columns = 0
    return columns if columns > 0 else shutil.get_terminal_size((100, 24)).columns


def wanted(stream: TextIO, fmt: str, verbosity: int) -> bool:
    """Whether `check` shows progress: text output, not -q, stderr a terminal that can erase a line."""
    try:
        terminal = stream.isatty()
    except (AttributeError, ValueError):
        terminal = False
    return terminal and fmt == "text" and verbosity >= 0 and os.environ.get("TERM", "") != "dumb"


def start_for_check(stream: TextIO, fmt: str, verbosity: int, total: int) -> None:
    """Turn the line on for a `check` of `total` files, when `wanted`."""
    global _line
    if _line is not None or not wanted(stream, fmt, verbosity):
        return
    _line = _Line(stream, total)
    _line.ticker.start()
    atexit.register(stop)


def stop() -> None:
    """Erase the line and turn it off (at exit too: Ctrl-C leaves no half line behind)."""
    global _line
    line, _line = _line, None
    if line is not None:
        line.stop.set()
        with line.lock:
            line.erase()


def _active() -> Optional[_Line]:
    line = _line
    return line if line is not None and line.pid == os.getpid() else None


def begin(path: str) -> None:
    """A new file: the clock restarts."""
    line = _active()
    if line is not None:
        with line.lock:
            line.files += 1
            line.file = os.path.basename(path) or path
            line.started = time.monotonic()
            line.stage = line.step = line.detail = ""
            line._draw()


def stage(name: str) -> None:
    line = _active()
    if line is not None:
        with line.lock:
            line.stage, line.step, line.detail = name, "", ""
            line._draw()


def step(text: str, trials: Iterable[str] = ()) -> None:
    """What the stage does now; `trials`: the names of the trials it runs, for "trial k of n"."""
    line = _active()
    if line is not None:
        with line.lock:
            line.step, line.detail, line.trials, line.labels = text, "", [str(t) for t in trials], []
            line._draw()


def phase(message: dict[str, Any]) -> None:
    """A worker's phase announcement (sandbox runner): `call` with a trial label counts the
    trials, `schedule` with a call index shows the call, any other names the phase."""
    line = _active()
    if line is None:
        return
    name = str(message.get("phase", ""))
    label, call = message.get("trial"), message.get("call")
    with line.lock:
        if label is not None:
            label = str(label)
            if label in line.trials and label not in line.labels:
                line.labels.append(label)
            # A call that is no trial of its own (a repeat of one) keeps the count where it is.
            k, n = len(line.labels), len(line.trials)
            line.detail = f"trial {k} of {n} ({label})" if n else f"call ({label})"
        elif call is not None:
            line.detail = f"{name} call {call}"
        else:
            line.detail = name
        line._draw(throttle=call is not None)  # each trial and phase shown; schedule calls at most 10/s


def clear() -> None:
    """Erase the line before a report is printed; the next `begin` draws it again."""
    line = _active()
    if line is not None:
        with line.lock:
            line.erase()


_NAME = re.compile(r"""\bname\s*=\s*(?:f?['"]([^'"]+)['"])""")


def extension_names(loader_calls: Iterable[str]) -> str:
    """'extension mean_ext' (or 'extensions a, b') from the loader calls' name= arguments."""
    names = list(dict.fromkeys(m.group(1) for call in loader_calls for m in [_NAME.search(call)] if m))
    if not names:
        return "the extension"
    return ("extension " if len(names) == 1 else "extensions ") + ", ".join(names)
