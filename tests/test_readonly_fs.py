"""Without bubblewrap, native code must not write the host's files either (issue 22 item 6):
under `unshare` every mount is read-only but the worker's own folders; with no isolation at
all, untrusted code runs only when the user opts in."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gatekeeper.sandbox.isolation import _candidate, _probe

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow


def _unshare():
    candidate = _candidate("unshare")
    if candidate is None or _probe(candidate) is not None:
        pytest.skip("unshare -rn does not work on this machine")
    return candidate


def test_native_writes_outside_the_worker_folders_fail_under_unshare(tmp_path):
    isolation = _unshare()
    work, cache, outside = tmp_path / "work", tmp_path / "cache", tmp_path / "outside"
    for folder in (work, cache, outside):
        folder.mkdir()
    # A write straight through libc, as a C++ extension would make it: no audit hook sees it.
    code = ("import ctypes, sys\n"
            "libc = ctypes.CDLL(None)\n"
            "for path in sys.argv[1:]:\n"
            "    fd = libc.open(path.encode(), 0o101, 0o644)\n"
            "    print(path, fd >= 0)\n")
    argv = isolation.wrap([sys.executable, "-c", code, str(work / "a"), str(cache / "b"), str(outside / "c")],
                          workdir=work, write_paths=[str(cache)])
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(work / "a"), "True", str(cache / "b"), "True", str(outside / "c"), "False"]
    assert not (outside / "c").exists()


def test_no_working_isolation_refuses_to_run_code_unless_the_user_opts_in(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    os.symlink(sys.executable, bin_dir / "python")  # no bwrap, no unshare on this PATH
    submission = ROOT / "fixtures/submissions/cpu_honest_python.py"
    problem = ROOT / "fixtures/problems/cpu_mean.py"
    env = {**os.environ, "PATH": str(bin_dir)}
    env.pop("GATEKEEPER_ISOLATION", None)
    done = subprocess.run([sys.executable, "-m", "gatekeeper", "check", str(submission), "-p", str(problem)],
                          capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 3, done.stdout + done.stderr
    assert "GATEKEEPER_ISOLATION=none" in done.stdout + done.stderr
    assert "install bubblewrap" in done.stdout + done.stderr or "bubblewrap" in done.stdout + done.stderr
