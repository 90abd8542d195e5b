"""The terminal conventions of every command: colour, NO_COLOR, and a reader that stops reading.

- NO_COLOR (no-color.org), when set and not empty, turns off every style, bold and dim
  included, unless `--color always` asks for them; rich alone drops only the colours.
- A closed pipe (`gatekeeper check . | head -c1`): gatekeeper stops writing and exits 0,
  as ruff does (astral-sh/ruff#13485, after ripgrep). Not 1, which means reject, and not a
  traceback. The exit code then says nothing about the verdict: scripts that need the
  verdict read gatekeeper's own exit status or `--output-file`, not a truncated pipe.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Optional, TextIO


def no_color() -> bool:
    return os.environ.get("NO_COLOR", "") != ""


def make_console(file: Optional[TextIO] = None, *, stderr: bool = False, color: str = "auto", **kwargs: Any):
    """A rich Console with gatekeeper's defaults: no highlighting, lines never hard-wrapped
    (soft_wrap: the terminal wraps, a pipe or a log keeps each message on one line)."""
    from rich.console import Console

    base: dict[str, Any] = {"file": file, "stderr": stderr, "highlight": False, "soft_wrap": True, **kwargs}
    if color == "always":  # an explicit flag beats NO_COLOR (no-color.org)
        return Console(**base, force_terminal=True, color_system="standard", no_color=False)
    if color == "never" or no_color():
        return Console(**base, no_color=True, color_system=None)  # color_system None: no bold/dim either
    return Console(**base)


class LazyConsole:
    """A console made on first use, so that `--version` and `--help` do not import rich."""

    def __init__(self, **kwargs: Any) -> None:
        self._kwargs = kwargs
        self._console = None

    def __getattr__(self, name: str) -> Any:
        if self._console is None:
            self._console = make_console(**self._kwargs)
        return getattr(self._console, name)


class PipeClosed(Exception):
    """stdout's reader went away. Not an OSError, so that click does not turn it into exit 1."""


class GuardedStdout:
    """sys.stdout (or the --output-file) whose writes turn BrokenPipeError into PipeClosed
    (raised through the command's cleanup: temporary folders and sandboxed workers are still
    removed) and any other OSError (ENOSPC, EIO) into ReportWriteError, exit 3. A character
    stdout's encoding cannot write is written as its escape."""

    def __init__(self, inner: TextIO, where: str = "standard output") -> None:
        self._inner = inner
        self._where = where

    def _failed(self, exc: OSError) -> Exception:
        from gatekeeper.errors import ReportWriteError

        if self._inner is sys.__stdout__:
            silence_stdout()  # what is still buffered goes nowhere, instead of failing again at exit
        return ReportWriteError(self._where, exc)

    def write(self, text: str) -> int:
        try:
            try:
                return self._inner.write(text)
            except UnicodeEncodeError:
                # A stdout that cannot encode a character of the report (PYTHONIOENCODING=ascii,
                # a C locale): the character is written as its escape, never a traceback in
                # place of the verdict. JSON output is ASCII already (render/json_text.py).
                encoding = getattr(self._inner, "encoding", None) or "ascii"
                return self._inner.write(text.encode(encoding, "backslashreplace").decode(encoding, "replace"))
        except BrokenPipeError:
            raise PipeClosed() from None
        except OSError as exc:
            raise self._failed(exc) from None

    def flush(self) -> None:
        try:
            self._inner.flush()
        except BrokenPipeError:
            raise PipeClosed() from None
        except OSError as exc:
            raise self._failed(exc) from None

    def close(self) -> None:
        try:
            self._inner.close()
        except BrokenPipeError:
            raise PipeClosed() from None
        except OSError as exc:
            raise self._failed(exc) from None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def silence_stdout() -> None:
    """Point stdout at /dev/null, so that the interpreter's last flush cannot fail again
    (the Python documentation's recipe for SIGPIPE)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.__stdout__.fileno())
    except (OSError, AttributeError, ValueError):
        pass


# torch warns "Failed to initialize NumPy: ..." at import whenever its NumPy bridge cannot load
# (NumPy missing, or built for another ABI). gatekeeper never hands arrays to NumPy, so the
# warning, printed on every run by every process that imports torch, tells the user nothing.
_NUMPY_WARNING = "Failed to initialize NumPy"


def quiet_known_warnings() -> None:
    """Filter torch's NumPy warning here and, through PYTHONWARNINGS, in the workers we start."""
    import warnings

    warnings.filterwarnings("ignore", message=_NUMPY_WARNING, category=UserWarning)
    entry = f"ignore:{_NUMPY_WARNING}:UserWarning"
    current = os.environ.get("PYTHONWARNINGS", "")
    if entry not in current:
        os.environ["PYTHONWARNINGS"] = f"{current},{entry}" if current else entry
