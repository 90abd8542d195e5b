"""The details users notice (issue 21, item 10): a closed pipe, NO_COLOR, unwrapped errors,
help text (flags, defaults, brackets), one --format convention, and a start-up that imports
nothing heavy. Real subprocesses and the real click command tree."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SEED = ROOT / "fixtures" / "submissions" / "seed_cached_hardcoded.py"
PROBLEM = ROOT / "fixtures" / "problems" / "seed_mean.py"
GK = [sys.executable, "-m", "gatekeeper"]


def run(*args, env=None, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([*GK, *map(str, args)], capture_output=True, text=True, timeout=300, cwd=cwd or ROOT,
                          env={**os.environ, **(env or {})})


def _command_tree():
    import typer.main

    from gatekeeper.cli import app

    root = typer.main.get_command(app)
    stack, found = [("", root)], {}
    while stack:
        name, command = stack.pop()
        found[name] = command
        for sub_name, sub in getattr(command, "commands", {}).items():
            stack.append(((name + " " + sub_name).strip(), sub))
    return found


def test_every_value_option_says_its_default_or_that_it_is_required():
    missing = []
    for name, command in _command_tree().items():
        for param in command.params:
            if param.param_type_name != "option" or param.is_flag or param.hidden or param.name == "help":
                continue
            text = (param.help or "")
            if param.required or "[default" in text or param.default not in (None, (), []):
                continue
            missing.append(f"{name} {param.opts[0]}")
    assert not missing, f"options whose help does not say what happens without them: {missing}"


def test_format_follows_one_convention():
    for name, command in _command_tree().items():
        for param in command.params:
            if "--format" in param.opts:
                assert "-f" in param.opts, name
                choices = param.type_descriptor.choices or ["text", "json"]  # gpu-specs: a str, checked there
                values = [getattr(c, "value", c) for c in choices]
                assert "json" in values or "jsonl" in values, (name, values)
                if "text" in values:
                    assert getattr(param.default, "value", param.default) == "text", name


def test_start_up_imports_nothing_heavy():
    code = ("import sys, gatekeeper.cli\n"
            "heavy = ('pydantic', 'libcst', 'rich', 'torch', 'numpy', 'gatekeeper.api', 'gatekeeper.report')\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy or m in heavy))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip() == "[]", done.stdout


@pytest.mark.slow
def test_help_shows_brackets_and_no_bool_metavar():
    ingest = run("ingest", "--help").stdout
    assert "'kernel-gatekeeper[ray]'" in " ".join(ingest.split())
    for command in ("check", "rules", "explain", "ingest"):
        assert "<bool>" not in run(command, "--help").stdout, command


@pytest.mark.slow
def test_a_closed_pipe_exits_0_like_ruff_not_1(tmp_path):
    """Output larger than a pipe's buffer (64 KiB), so gatekeeper still writes after head exits."""
    for i in range(30):
        shutil.copy(SEED, tmp_path / f"s{i}.py")
    command = " ".join([*GK, "check", str(tmp_path), "-p", str(PROBLEM), "--static-only"])
    piped = subprocess.run(["bash", "-c", f"{command} 2>{tmp_path}/err | head -c1 >/dev/null; "
                            "echo ${PIPESTATUS[0]}"], capture_output=True, text=True, timeout=600, cwd=ROOT)
    error_text = (tmp_path / "err").read_text()
    assert piped.stdout.strip() == "0", (piped.stdout, error_text)
    assert "Traceback" not in error_text and "Exception ignored" not in error_text and "Broken pipe" not in error_text
    # The near miss: read to the end, the same run rejects (exit 1).
    whole = subprocess.run(["bash", "-c", f"{command} >/dev/null"], timeout=600, cwd=ROOT)
    assert whole.returncode == 1


@pytest.mark.slow
def test_no_color_drops_bold_and_dim_too():
    args = ("check", SEED, "-p", PROBLEM, "--static-only", "-q")
    styled = run(*args, env={"FORCE_COLOR": "1"})
    assert "\x1b[" in styled.stdout  # the near miss: a terminal gets styles
    plain = run(*args, env={"FORCE_COLOR": "1", "NO_COLOR": "1"})
    assert "\x1b[" not in plain.stdout and plain.returncode == 1
    error = run("check", "no/such.py", env={"FORCE_COLOR": "1", "NO_COLOR": "1"})
    assert error.returncode == 2 and "\x1b[" not in error.stderr
    always = run(*args, "--color", "always", env={"NO_COLOR": "1"})
    assert "\x1b[" in always.stdout  # an explicit flag beats NO_COLOR


@pytest.mark.slow
def test_error_text_is_one_line_in_a_pipe():
    proc = run("check", SEED, "-p", PROBLEM, "--static-only", "--select", "qqqqqqqq", env={"COLUMNS": "60"})
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and len(lines[0]) > 120, proc.stderr
    assert "'qqqqqqqq' in --select matches no code" in lines[0]


def test_torchs_numpy_warning_is_filtered_here_and_in_child_processes():
    code = ("import subprocess, sys, warnings\n"
            "from gatekeeper.term import quiet_known_warnings\n"
            "quiet_known_warnings()\n"
            "warnings.warn('Failed to initialize NumPy: _ARRAY_API not found', UserWarning)\n"
            "warnings.warn('another warning stays', UserWarning)\n"
            "subprocess.run([sys.executable, '-c', \"import warnings; "
            "warnings.warn('Failed to initialize NumPy: child', UserWarning)\"], check=True)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert "Failed to initialize NumPy" not in done.stderr and "another warning stays" in done.stderr
