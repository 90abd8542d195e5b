"""`--color auto|always|never` and the NO_COLOR / FORCE_COLOR conventions (no-color.org,
force-color.org): auto colours a terminal only, NO_COLOR turns colour off under auto,
FORCE_COLOR turns it on under auto, and an explicit `--color` beats both. The CLI runs in a
real subprocess, its stdout a pipe or a real pseudo-terminal."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # runs the CLI in subprocesses

ROOT = Path(__file__).resolve().parent.parent
SEED = ROOT / "fixtures" / "submissions" / "seed_cached_hardcoded.py"
PROBLEM = ROOT / "fixtures" / "problems" / "seed_mean.py"
ARGS = [sys.executable, "-m", "gatekeeper", "check", str(SEED), "-p", str(PROBLEM), "--static-only"]
_SGR = re.compile(r"\x1b\[([0-9;]*)m")


def colours(text: str) -> list[str]:
    """The colour parameters of the text's SGR escapes (30-37, 38;..., 90-97 and their
    backgrounds); bold and dim are not colour, and NO_COLOR allows them."""
    found = []
    for match in _SGR.finditer(text):
        params = match.group(1).split(";")
        i = 0
        while i < len(params):
            p = int(params[i] or 0)
            if p in (38, 48):  # extended colour: 38;5;n or 38;2;r;g;b
                found.append(";".join(params[i:i + (3 if params[i + 1:i + 2] == ["5"] else 5)]))
                i += 3 if params[i + 1:i + 2] == ["5"] else 5
                continue
            if 30 <= p <= 37 or 40 <= p <= 47 or 90 <= p <= 97 or 100 <= p <= 107:
                found.append(str(p))
            i += 1
    return found


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE", "COLUMNS")}
    env["TERM"] = "xterm-256color"
    return {**env, **extra}


def on_a_pipe(*extra_args: str, **env: str) -> str:
    proc = subprocess.run([*ARGS, *extra_args], capture_output=True, text=True, timeout=120, env=_env(**env),
                          cwd=ROOT)
    assert proc.returncode == 1 and "GK101" in proc.stdout, proc.stderr
    return proc.stdout


def on_a_terminal(*extra_args: str, **env: str) -> str:
    """stdout on a pseudo-terminal, as in an interactive shell."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen([*ARGS, *extra_args], stdout=follower, stderr=subprocess.PIPE, env=_env(**env), cwd=ROOT)
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 65536)
        except OSError:  # EIO: the child closed its end
            break
        if not data:
            break
        chunks.append(data)
    os.close(leader)
    proc.stderr.read()
    assert proc.wait(timeout=120) == 1
    text = b"".join(chunks).decode("utf-8", errors="replace")
    assert "GK101" in text
    return text


def test_colours_helper_tells_colour_from_bold():
    assert colours("\x1b[1mbold\x1b[0m \x1b[2mdim\x1b[0m") == []
    assert colours("\x1b[1;31mred\x1b[0m \x1b[38;5;208mx\x1b[0m \x1b[38;2;1;2;3my") == ["31", "38;5;208", "38;2;1;2;3"]


def test_auto_colours_a_terminal_and_not_a_pipe():
    assert colours(on_a_terminal())  # auto is the default
    assert colours(on_a_terminal("--color", "auto"))
    piped = on_a_pipe("--color", "auto")
    assert "\x1b[" not in piped  # no escapes at all: a pipe gets plain text


def test_no_color_turns_colour_off_under_auto():
    assert not colours(on_a_terminal(NO_COLOR="1"))
    assert not colours(on_a_pipe(NO_COLOR="1"))
    assert colours(on_a_terminal(NO_COLOR=""))  # an empty NO_COLOR is not set (no-color.org)


def test_force_color_and_color_always_force_colour():
    assert colours(on_a_pipe(FORCE_COLOR="1"))
    assert colours(on_a_pipe("--color", "always"))
    # An explicit flag beats the environment, either way.
    assert colours(on_a_pipe("--color", "always", NO_COLOR="1"))
    assert "\x1b[" not in on_a_pipe("--color", "never", FORCE_COLOR="1")
    assert "\x1b[" not in on_a_terminal("--color", "never")
