"""Shell completion (README's options table: `--show-completion`, `--install-completion`):
the installed `gatekeeper` command prints a bash completion script, and the completion
protocol that script calls answers with the commands (`check`, ...) and `check`'s options.
Real subprocesses of the installed console script."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # runs the CLI in subprocesses


def _gatekeeper() -> str:
    """The console script pip installed with this interpreter (the one users run)."""
    beside = Path(sys.executable).parent / "gatekeeper"
    found = str(beside) if beside.is_file() else shutil.which("gatekeeper")
    assert found, "the gatekeeper console script is not installed (pip install -e .)"
    return found


def _run(args: list[str], **env: str) -> subprocess.CompletedProcess:
    proc = subprocess.run([_gatekeeper(), *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **env})
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def _from_shell(shell: str, args: str) -> subprocess.CompletedProcess:
    """Run the console script from `shell`, as a user does: the completion options detect
    the shell from the parent process (an extra word such as `bash` is ignored)."""
    # A second command, so the shell does not exec the first in its own place (then it
    # would not be the parent, and a test run without a shell above it would fail).
    status = "$status" if Path(shell).name == "fish" else "$?"
    proc = subprocess.run([shell, "-c", f"{_gatekeeper()} {args}; exit {status}"], capture_output=True, text=True,
                          timeout=120)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def test_show_completion_prints_a_bash_script_for_gatekeeper():
    proc = _from_shell(shutil.which("bash") or "bash", "--show-completion")
    assert proc.returncode == 0, proc.stderr
    script = proc.stdout
    assert "complete -o default -F _gatekeeper_completion gatekeeper" in script
    assert "_GATEKEEPER_COMPLETE=complete_bash" in script  # the protocol below


def test_the_completion_protocol_names_check_and_its_options():
    def complete(words: str) -> list[str]:
        proc = _run([], _GATEKEEPER_COMPLETE="complete_bash", COMP_WORDS=words,
                    COMP_CWORD=str(len(words.split(" ")) - 1))
        assert proc.returncode == 0, proc.stderr
        return proc.stdout.split()

    assert complete("gatekeeper ch") == ["check"]
    assert {"check", "rules", "explain", "schema", "config"} <= set(complete("gatekeeper "))
    assert complete("gatekeeper check --col") == ["--color"]
    assert {"--select", "--ignore", "--static-only", "--format"} <= set(complete("gatekeeper check --"))


@pytest.mark.parametrize("shell", ["zsh", "fish"])
def test_other_shells_get_a_script_too(shell):
    path = shutil.which(shell)
    if path is None:
        pytest.skip(f"{shell} is not installed")
    proc = _from_shell(path, "--show-completion")
    assert proc.returncode == 0 and "_GATEKEEPER_COMPLETE" in proc.stdout, proc.stderr
    assert "complete -o default -F" not in proc.stdout  # not the bash script
