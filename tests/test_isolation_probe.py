"""The isolation that is installed is the one used (issue 21, item 3): a check run from a
virtual environment under /tmp gets bubblewrap; without bubblewrap the report and -v say
why and how to get it; an installed bubblewrap that cannot work is never met with "install
bubblewrap". Real venvs, real bwrap, real user-namespace limits: no mocks."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from gatekeeper.sandbox.isolation import _detect, bwrap_args

pytestmark = pytest.mark.slow  # runs checks in sandboxes, from a fresh virtual environment

ROOT = Path(__file__).resolve().parents[1]
HONEST = ROOT / "fixtures" / "hostile" / "honest_python.py"
SETTINGS = ROOT / "fixtures" / "hostile" / "gatekeeper.toml"  # static rules off, short limits
PROBLEM = ROOT / "fixtures" / "problems" / "cpu_mean.py"
WALL_S = 240


def _bwrap_works() -> None:
    if _detect("bwrap").name != "bwrap":
        pytest.skip(f"bubblewrap does not work on this machine ({_detect('bwrap').reason})")


@pytest.fixture(scope="module")
def tmp_venv():
    """A virtual environment under /tmp, as a user makes one (cheap: the system's packages, no pip)."""
    folder = Path(tempfile.mkdtemp(prefix="gk-venv-", dir="/tmp"))
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(folder / "venv")],
                   check=True, timeout=120)
    yield folder / "venv" / "bin" / "python"
    shutil.rmtree(folder, ignore_errors=True)


def _submission(tmp_path: Path) -> Path:
    shutil.copy(SETTINGS, tmp_path / "gatekeeper.toml")
    return Path(shutil.copy(HONEST, tmp_path / "honest_python.py"))


def _check(python: Path, path: Path, *args: str, env: dict) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k != "GATEKEEPER_ISOLATION"}  # auto: what it finds
    return subprocess.run([str(python), "-m", "gatekeeper", "check", str(path), "-p", str(PROBLEM), "-f", "json",
                           *args], capture_output=True, text=True, timeout=WALL_S, env={**environ, **env},
                          cwd=path.parent)


def _path_without_bwrap(tmp_path: Path) -> str:
    """A PATH with the tools a check uses but no bwrap: bubblewrap "not installed"."""
    folder = tmp_path / "bin"
    folder.mkdir()
    for tool in ("unshare", "setsid", "c++", "g++", "gcc", "cc", "ninja", "ld", "as"):
        found = shutil.which(tool)
        if found:
            (folder / tool).symlink_to(found)
    return str(folder)


def test_a_check_from_a_venv_under_tmp_runs_under_bubblewrap(tmp_path, tmp_venv):
    _bwrap_works()
    done = _check(tmp_venv, _submission(tmp_path), env={})
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout)
    assert report["environment"]["isolation"] == "bwrap", report["environment"]
    assert report["environment"]["isolation_reason"] is None
    assert report["verdict"] == "pass"


def test_without_bubblewrap_the_report_and_v_say_it_is_not_installed(tmp_path):
    path = _submission(tmp_path)
    no_bwrap = {"PATH": _path_without_bwrap(tmp_path)}
    done = _check(Path(sys.executable), path, "-v", env=no_bwrap)
    assert done.returncode == 0, done.stderr[-2000:]
    environment = json.loads(done.stdout)["environment"]
    assert environment["isolation"] in ("unshare", "none")
    assert "not installed" in environment["isolation_reason"]
    assert "apt-get install bubblewrap" in environment["isolation_reason"]
    assert "not bubblewrap: bubblewrap is not installed" in done.stderr or "without OS isolation" in done.stderr
    # --require-isolation refuses before any code runs, and says to install it.
    refused = _check(Path(sys.executable), path, "--require-isolation", env=no_bwrap)
    assert refused.returncode == 3 and "isolation required" in refused.stderr, refused.stderr
    assert "apt-get install bubblewrap" in refused.stderr


def _in_exhausted_user_namespaces(argv: list[str]) -> subprocess.CompletedProcess:
    """Run argv where bubblewrap is installed but cannot create a namespace: a user namespace
    whose max_user_namespaces allows only the one it runs in (as in nested containers)."""
    if shutil.which("unshare") is None or _detect("unshare").name != "unshare":
        pytest.skip("needs unprivileged user namespaces (unshare -r) to build the unusable-bubblewrap setting")
    inner = " ".join(f"'{a}'" for a in argv)
    script = ("echo 1 > /proc/sys/user/max_user_namespaces && "
              f"exec unshare --user --map-user={os.getuid() or 1000} --map-group={os.getgid() or 1000} {inner}")
    return subprocess.run(["unshare", "-r", "sh", "-c", script], capture_output=True, text=True, timeout=WALL_S,
                          env={k: v for k, v in os.environ.items() if k != "GATEKEEPER_ISOLATION"})


def test_an_installed_bubblewrap_that_cannot_work_says_why_not_install(tmp_path):
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap is not installed")
    probe = _in_exhausted_user_namespaces([sys.executable, "-c", "from gatekeeper.sandbox.isolation import detect; "
                                           "import json; d = detect(); print(json.dumps([d.name, d.reason]))"])
    if probe.returncode != 0:
        pytest.skip(f"this machine cannot limit nested user namespaces: {probe.stderr[-300:]}")
    name, reason = json.loads(probe.stdout)
    assert name != "bwrap"
    assert "is installed but cannot be used" in reason and "namespace" in reason
    assert "not installed" not in reason and "apt-get install" not in reason
    path = _submission(tmp_path)
    refused = _in_exhausted_user_namespaces([sys.executable, "-m", "gatekeeper", "check", str(path), "-p",
                                             str(PROBLEM), "--require-isolation"])
    # Refused (by --require-isolation, or because nothing keeps the files safe), never with
    # advice to install what is installed.
    assert refused.returncode == 3 and "is installed but cannot be used" in refused.stderr, refused.stderr
    assert "apt-get install" not in refused.stderr and "install bubblewrap" not in refused.stderr


def test_no_mount_hides_an_earlier_one():
    """bubblewrap mounts in order: a later mount over a parent folder hides what was bound
    below it. With the working folder at /tmp (the old probe's) and files under it, every
    mount still comes after its parents'."""
    scratch = Path(tempfile.mkdtemp(prefix="gk-mounts-", dir="/tmp"))
    try:
        named = scratch / "sub.py"
        named.write_text("x = 1\n")
        args = bwrap_args(Path("/tmp"), [str(named)], [str(scratch / "cache")], extra_ro=[str(scratch)])
        targets = []
        for i, arg in enumerate(args):
            if arg in ("--ro-bind", "--bind", "--dev-bind"):
                targets.append(args[i + 2])
            elif arg in ("--tmpfs", "--dir", "--proc", "--dev"):
                targets.append(args[i + 1])
        for i, earlier in enumerate(targets):
            for later in targets[i + 1:]:
                assert not Path(earlier).is_relative_to(later) or later == earlier, (later, "hides", earlier)
        assert str(named) in targets and str(scratch / "cache") in targets
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
