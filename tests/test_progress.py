"""Progress on a terminal (issue 21, item 2): `gatekeeper check` on a real pty shows the
stage, the extension being compiled, the trial k of n and the elapsed time on stderr, and
erases the line before the report; a pipe, JSON and -q show nothing."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # runs a real check with a cold build

ROOT = Path(__file__).resolve().parent.parent
SUBMISSION = ROOT / "fixtures" / "submissions" / "cpu_honest_cpp.py"  # load_inline(name="gk_cpu_mean_dim0")
PROBLEM = ROOT / "fixtures" / "problems" / "cpu_mean.py"
CLEAR = "\r\x1b[2K"
LINE = re.compile(r"gatekeeper \[(\d+) s\] ([^\r\x1b]*)")


@pytest.fixture(scope="module")
def cold_cache(tmp_path_factory) -> Path:
    """A build cache of this module's own: the first check compiles, as on a fresh machine."""
    return tmp_path_factory.mktemp("progress-cache")


def _run(args: list[str], cache: Path, stderr_on_pty: bool) -> tuple[int, str, str]:
    """The CLI with stdout on a pipe and stderr on a pty (or a pipe): (code, stdout, stderr)."""
    env = {**os.environ, "GATEKEEPER_CACHE_DIR": str(cache), "TERM": "xterm"}
    argv = [sys.executable, "-m", "gatekeeper", "check", str(SUBMISSION), "-p", str(PROBLEM), *args]
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


def test_a_cold_check_on_a_terminal_shows_stage_extension_trials_and_time(cold_cache):
    code, stdout, stderr = _run([], cold_cache, stderr_on_pty=True)
    assert code == 0 and "PASS" in stdout, (stdout, stderr[-2000:])
    lines = [(int(m.group(1)), m.group(2)) for m in LINE.finditer(stderr)]
    assert lines, stderr[-2000:]
    texts = [text for _, text in lines]
    assert all(t.startswith("cpu_honest_cpp.py") for t in texts)
    for stage in ("static", "build", "behaviour"):
        assert any(f" · {stage}" in t for t in texts), (stage, texts[:20])
    assert any("compiling extension gk_cpu_mean_dim0" in t for t in texts), texts[:20]
    trials = [tuple(map(int, m)) for t in texts for m in re.findall(r"trial (\d+) of (\d+)", t)]
    assert trials and trials[-1][0] == trials[-1][1] >= 3, trials  # counted up to the last of n
    assert [k for k, _ in trials] == sorted(k for k, _ in trials)
    assert len({seconds for seconds, _ in lines}) >= 2  # the clock moves while it compiles
    assert stderr.endswith(CLEAR), repr(stderr[-200:])  # erased before the report


def test_a_pipe_json_and_quiet_show_nothing(cold_cache):
    code, stdout, stderr = _run([], cold_cache, stderr_on_pty=False)
    assert code == 0 and "PASS" in stdout
    assert not LINE.search(stderr) and "\r" not in stderr and "\x1b" not in stderr, repr(stderr[-500:])
    for args in (["-f", "json", "--static-only"], ["-q", "--static-only"]):  # the same switch gates every stage
        code, stdout, stderr = _run(args, cold_cache, stderr_on_pty=True)
        assert code == 0, stderr
        assert not LINE.search(stderr) and CLEAR not in stderr, (args, repr(stderr[-500:]))
