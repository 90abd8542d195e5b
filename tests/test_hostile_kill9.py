"""Issue 12, row 5: `kill -9` of `gatekeeper ingest` (or `check --jobs`) leaves nothing running
and no temp dir.

The real `gatekeeper ingest` (or `check --jobs 2`) runs in a subprocess on two slow hostile submissions: one whose
build never ends (cc1plus blocks on a FIFO; ninja starts it in a process group of its own)
and one that double-forks a `setsid` sleeper and then sleeps at import. Once a compiler and
the sleeper are seen running, the gatekeeper process is SIGKILLed. Every process seen during the
run (descendants of ingest, and anything whose environment or argv names the run's private
TMPDIR) must be gone within a bounded wait, and that TMPDIR must be empty.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from gatekeeper.sandbox.isolation import _detect

pytestmark = pytest.mark.slow  # kills ingest and check runs and checks what is left

ROOT = Path(__file__).resolve().parents[1]
HOSTILE = ROOT / "fixtures" / "hostile"
SLEEPER = b"86423"  # fixtures/hostile/slow_detached.py's sleeper argv
START_WAIT_S = 150  # until a compiler and the sleeper run (ingest workers import torch first)
GONE_WAIT_S = 15  # after the kill


def _stat(pid: int) -> tuple[str, int, int]:
    """(state, parent pid, start time) of a live process; raises OSError when it is gone."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return fields[0], int(fields[1]), int(fields[19])


def _snapshot(root: int, marker: bytes) -> dict[int, tuple[int, str]]:
    """Processes that belong to the run: descendants of `root`, and any process whose
    environment or argv carries `marker` (a `setsid` double fork leaves the tree at once).
    pid -> (start time, command name), so a recycled pid is not mistaken for a survivor."""
    table: dict[int, tuple[str, int, int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                table[int(entry)] = _stat(int(entry))
            except (OSError, IndexError, ValueError):
                continue
    ours = {root}
    grew = True
    while grew:
        grew = False
        for pid, (_, ppid, _) in table.items():
            if ppid in ours and pid not in ours:
                ours.add(pid)
                grew = True
    for pid in table:
        if pid in ours:
            continue
        for name in ("environ", "cmdline"):
            try:
                if marker in Path(f"/proc/{pid}/{name}").read_bytes():
                    ours.add(pid)
                    break
            except OSError:
                continue
    found = {}
    for pid in ours:
        if pid in table and table[pid][0] != "Z":
            try:
                comm = Path(f"/proc/{pid}/comm").read_text().strip()
            except OSError:
                continue
            found[pid] = (table[pid][2], comm)
    return found


def _alive(seen: dict[int, tuple[int, str]]) -> dict[int, str]:
    out = {}
    for pid, (start, comm) in seen.items():
        try:
            state, _, now_start = _stat(pid)
        except (OSError, IndexError, ValueError):
            continue
        if now_start == start and state != "Z":
            out[pid] = comm
    return out


def _argv_has(pid: int, token: bytes) -> bool:
    try:
        return token in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False


def _command(kind: str, tmp_path: Path, problems: Path, config: Path) -> list[str]:
    """`gatekeeper ingest` (local pool or `--executor ray`) or `gatekeeper check --jobs 2` on
    the two slow submissions."""
    fixtures = ("build_never_ends.py", "slow_detached.py")
    if kind in ("ingest", "ray"):
        source = tmp_path / "subs.jsonl"
        with source.open("w") as handle:
            for fixture in fixtures:
                handle.write(json.dumps({"id": fixture, "problem": "cpu_mean",
                                         "code": (HOSTILE / fixture).read_text()}) + "\n")
        return ["ingest", str(source), "--problems", str(problems), "--store", str(tmp_path / "results.db"),
                "--config", str(config), "--jobs", "2", *(["--executor", "ray"] if kind == "ray" else [])]
    folder = tmp_path / "subs"
    folder.mkdir()
    files = [str(shutil.copy(HOSTILE / fixture, folder / fixture)) for fixture in fixtures]
    return ["check", *files, "-p", str(problems / "cpu_mean.py"), "--config", str(config), "--jobs", "2",
            "--keep-going"]


@pytest.mark.parametrize("kind", ["ingest", "check", "ray"])
@pytest.mark.parametrize("level", ["bwrap", "none"])
def test_row5_kill_9_leaves_no_process_and_no_temp_dir(tmp_path, level, kind):
    if _detect(level).name != level:
        pytest.skip(f"isolation '{level}' does not work on this machine ({_detect(level).detail})")
    if kind == "ray":
        pytest.importorskip("ray")
    problems = tmp_path / "problems"
    problems.mkdir()
    for name in ("cpu_mean.py", "cpu_mean.toml"):
        shutil.copy(ROOT / "fixtures" / "problems" / name, problems / name)
    config = tmp_path / "gatekeeper.toml"
    # Limits long enough that the kill lands mid-build and mid-import, not after a timeout.
    config.write_text((HOSTILE / "gatekeeper.toml").read_text()
                      .replace("import_timeout_s = 20", "import_timeout_s = 200")
                      .replace("build_timeout_s = 15", "build_timeout_s = 200"))
    scratch = tmp_path / "tmp"  # the run's only temp root: it must end empty
    scratch.mkdir()
    env = {**os.environ, "GATEKEEPER_ISOLATION": level, "TMPDIR": str(scratch),
           "GATEKEEPER_CACHE_DIR": str(tmp_path / "cache")}
    ray_dir = None
    if kind == "ray":  # Ray's own session folder (logs, sockets: a short path) is not the run's temp root
        ray_dir = Path(tempfile.mkdtemp(prefix="gk-ray-", dir="/tmp"))
        env["RAY_TMPDIR"] = str(ray_dir)
    proc = subprocess.Popen([sys.executable, "-m", "gatekeeper", *_command(kind, tmp_path, problems, config)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, start_new_session=True)
    marker = str(scratch).encode()
    seen: dict[int, tuple[int, str]] = {}
    try:
        deadline = time.monotonic() + START_WAIT_S
        while True:
            seen.update(_snapshot(proc.pid, marker))
            live = _alive(seen)
            compiling = "cc1plus" in live.values()
            sleeping = any(_argv_has(pid, SLEEPER) for pid in live)
            if compiling and sleeping:
                break
            assert proc.poll() is None, f"{kind} ended before the kill: {proc.stderr.read().decode()[-2000:]}"
            assert time.monotonic() < deadline, f"no compiler and sleeper within {START_WAIT_S} s: {live}; " + \
                subprocess.run(["ps", "-ef", "--forest"], capture_output=True, text=True).stdout[-6000:]
            time.sleep(0.2)
        seen.update(_snapshot(proc.pid, marker))
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        deadline = time.monotonic() + GONE_WAIT_S
        while (_alive(seen) or any(scratch.iterdir())) and time.monotonic() < deadline:
            time.sleep(0.2)
        survivors = _alive(seen)
        left = sorted(p.name for p in scratch.iterdir())
    finally:
        for pid in _alive(seen):  # a failing run must not leave its processes to the next test
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        if ray_dir is not None:
            shutil.rmtree(ray_dir, ignore_errors=True)
    assert not survivors, f"{GONE_WAIT_S} s after kill -9 of {kind} these still run: {survivors}"
    assert not left, f"temp dirs left behind in TMPDIR: {left}"
