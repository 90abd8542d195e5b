"""Progress on a terminal (issue 21, item 2): `gatekeeper check` on a real pty shows the
stage, the extension being compiled, the trial k of n and the elapsed time on stderr, and
erases the line before the report; a pipe, JSON and -q show nothing."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import shutil
import struct
import subprocess
import sys
import termios
from pathlib import Path
from typing import Optional

import pytest

pytestmark = pytest.mark.slow  # runs real checks in sandboxes

ROOT = Path(__file__).resolve().parent.parent
HONEST = ROOT / "fixtures" / "hostile" / "honest_python.py"  # plain Python: no compile, every trial runs
SETTINGS = ROOT / "fixtures" / "hostile" / "gatekeeper.toml"  # static rules off, short limits
PROBLEM = ROOT / "fixtures" / "problems" / "cpu_mean.py"
CLEAR = "\r\x1b[2K"
LINE = re.compile(r"gatekeeper \[(\d+) s\] ([^\r\x1b]*)")
# An extension whose C++ file stops at its first line: the build stage compiles it (cold, in
# a cache of the test's own) and fails in a moment, without parsing torch's headers.
BROKEN = """import torch
from pathlib import Path
from typing import Optional
from torch.utils.cpp_extension import load

_ext = load(name="gk_progress_probe", sources=[str(Path(__file__).with_name("probe.cpp"))])


class ModelNew(torch.nn.Module):
    def forward(self, x):
        return _ext.mean(x)
"""


@pytest.fixture
def honest(tmp_path) -> Path:
    shutil.copy(SETTINGS, tmp_path / "gatekeeper.toml")
    return Path(shutil.copy(HONEST, tmp_path / "honest_python.py"))


def _run(submission: Path, args: list[str], stderr_on_pty: bool, cache: Optional[Path] = None) -> tuple[int, str, str]:
    """The CLI with stdout on a pipe and stderr on a pty (or a pipe): (code, stdout, stderr)."""
    env = {**os.environ, "TERM": "xterm", **({"GATEKEEPER_CACHE_DIR": str(cache)} if cache else {})}
    argv = [sys.executable, "-m", "gatekeeper", "check", str(submission), "-p", str(PROBLEM), *args]
    if not stderr_on_pty:
        done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600)
        return done.returncode, done.stdout, done.stderr
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 200, 0, 0))  # 200 columns: no cut lines
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=slave, stdin=subprocess.DEVNULL, env=env)
    os.close(slave)
    seen, out = bytearray(), bytearray()
    assert proc.stdout is not None
    streams = {master: seen, proc.stdout.fileno(): out}
    while streams:  # read both as they come: a full pty buffer would block the check
        ready, _, _ = select.select(list(streams), [], [], 600)
        assert ready, "the check printed nothing for 10 minutes"
        for fd in ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # EIO: the pty's other side is closed
                chunk = b""
            if chunk:
                streams[fd].extend(chunk)
            else:
                del streams[fd]
    os.close(master)
    return proc.wait(timeout=60), out.decode(), seen.decode("utf-8", "replace")


def test_a_check_on_a_terminal_shows_stage_trials_and_time_and_erases_the_line(honest):
    code, stdout, stderr = _run(honest, [], stderr_on_pty=True)
    assert code == 0 and "PASS" in stdout, (stdout, stderr[-2000:])
    lines = [(int(m.group(1)), m.group(2)) for m in LINE.finditer(stderr)]
    assert lines, stderr[-2000:]
    texts = [text for _, text in lines]
    assert all(t.startswith("honest_python.py") for t in texts)
    for stage in ("build", "behaviour"):
        assert any(f" · {stage}" in t for t in texts), (stage, texts[:20])
    trials = [tuple(map(int, m)) for t in texts for m in re.findall(r"trial (\d+) of (\d+)", t)]
    assert trials and trials[-1][0] == trials[-1][1] >= 3, trials  # counted up to the last of n
    assert [k for k, _ in trials] == sorted(k for k, _ in trials)
    assert len({seconds for seconds, _ in lines}) >= 2  # the clock moves (two workers start torch)
    assert stderr.endswith(CLEAR), repr(stderr[-200:])  # erased before the report


def test_the_extension_being_compiled_is_named(tmp_path):
    (tmp_path / "probe.cpp").write_text("#error this extension stops the compiler at once\n")
    (tmp_path / "broken.py").write_text(BROKEN)
    code, stdout, stderr = _run(tmp_path / "broken.py", [], stderr_on_pty=True, cache=tmp_path / "cache")
    assert code == 1 and "GK680" in stdout, (stdout, stderr[-2000:])  # the compile error, on its line
    texts = [m.group(2) for m in LINE.finditer(stderr)]
    assert any(" · build · compiling extension gk_progress_probe" in t for t in texts), texts


def test_a_pipe_json_and_quiet_show_nothing(honest):
    code, stdout, stderr = _run(honest, [], stderr_on_pty=False)
    assert code == 0 and "PASS" in stdout
    assert not LINE.search(stderr) and "\r" not in stderr and "\x1b" not in stderr, repr(stderr[-500:])
    # One switch gates every call (begin, stage, step, phase): --static-only keeps these cheap,
    # and the same run in text form shows the line, so the silence below is the switch's.
    assert LINE.search(_run(honest, ["--static-only"], stderr_on_pty=True)[2])
    for args in (["-f", "json"], ["-q"]):
        code, stdout, stderr = _run(honest, [*args, "--static-only"], stderr_on_pty=True)
        assert code == 0, stderr
        assert not LINE.search(stderr) and CLEAR not in stderr, (args, repr(stderr[-500:]))
