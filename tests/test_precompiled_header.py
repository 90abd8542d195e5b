"""The precompiled torch/extension.h (gatekeeper/build/pch.py): GCC uses it for the options
torch really builds with, a changed file is never handed to a build, a build never waits for
it, and a compiler that cannot use it leaves builds as they were."""

from __future__ import annotations

import fcntl
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

import gatekeeper
from gatekeeper.build import pch

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def _used_header(cflags: list[str], source: Path, root: Path) -> str:
    """The first precompiled header GCC reports as used (`-H` marks it with `!`), or ''."""
    env = {**os.environ, "CPATH": str(root)}
    done = subprocess.run(["c++", *cflags, "-H", "-fsyntax-only", str(source)], capture_output=True,
                          text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    used = [line[2:] for line in done.stderr.splitlines() if line.startswith("! ")]
    return used[0] if used else ""


@pytest.mark.slow
def test_gcc_uses_it_for_the_options_torch_builds_an_extension_with(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("GATEKEEPER_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv(pch.ENV, "1")
    headers = pch.prepare(True, cuda=False)
    if headers is None:  # another process of this session is making them: wait for it
        headers = _wait_for_headers()
    report = gatekeeper.check(FIXTURES / "submissions" / "cpu_honest_cpp.py", FIXTURES / "problems" / "cpu_mean.py",
                              stages="build")
    assert [s.status.value for s in report.stages if s.name.value == "build"] == ["passed"]
    ninja = next((tmp_path / "cache" / "torch_extensions").glob("*/*/build.ninja"))
    line = next(l for l in ninja.read_text().splitlines() if l.startswith("cflags = "))
    cflags = shlex.split(line[len("cflags = "):])
    source = ninja.with_name("main.cpp")
    # The submission's own -O2, and torch's default (no -O): each finds its variant.
    assert "-O2" in cflags
    assert _used_header(cflags, source, headers.root) == str(headers.root / "torch/extension.h.gch/optimised.gch")
    plain = [f for f in cflags if f != "-O2"]
    assert _used_header(plain, source, headers.root) == str(headers.root / "torch/extension.h.gch/plain.gch")
    # Options it was not made for (fast-math defines __FAST_MATH__): GCC reads the header itself.
    assert _used_header([*cflags, "-ffast-math"], source, headers.root) == ""
    # The header included twice (load_inline adds one before the submission's own, as in the
    # toolchain probe): the second include reads the header, it does not fail.
    twice = tmp_path / "twice.cpp"
    twice.write_text("#include <torch/extension.h>\n" + source.read_text())
    assert _used_header(cflags, twice, headers.root) == str(headers.root / "torch/extension.h.gch/optimised.gch")


def _wait_for_headers() -> pch.Headers:
    import time

    deadline = time.monotonic() + 900
    while time.monotonic() < deadline:
        found = pch._verified(pch.home() / pch._signature())
        if found is not None:
            return found
        time.sleep(2)
    pytest.fail("the precompiled header was not made within 15 minutes")


def _fake_headers(root: Path) -> Path:
    gch = root / "torch" / "extension.h.gch" / "optimised.gch"
    gch.parent.mkdir(parents=True)
    gch.write_bytes(b"gpch" + b"\0" * 64)
    (root / "manifest.json").write_text(json.dumps({"torch/extension.h.gch/optimised.gch": pch._stamp(gch)}))
    return gch


def test_a_header_changed_after_it_was_made_is_not_used(tmp_path: Path) -> None:
    gch = _fake_headers(tmp_path / "made")
    assert pch._verified(tmp_path / "made") == pch.Headers(tmp_path / "made", (str(gch),))
    with gch.open("r+b") as fh:  # same size, new content: the ctime moves
        fh.write(b"evil")
    assert pch._verified(tmp_path / "made") is None
    os.utime(gch, (0, 0))  # putting the mtime back does not help: ctime cannot be set
    assert pch._verified(tmp_path / "made") is None


def test_a_build_goes_without_it_while_another_process_makes_it(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv(pch.DIR_ENV, str(tmp_path))
    monkeypatch.setenv(pch.ENV, "1")
    with open(tmp_path / f"{pch._signature()}.lock", "a+") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        assert pch.prepare(True, cuda=False) is None
    assert not (tmp_path / pch._signature()).exists()  # nothing made, nothing marked failed


def test_it_is_off_unless_configured_and_never_for_cuda_builds(monkeypatch) -> None:
    monkeypatch.delenv(pch.ENV, raising=False)
    assert pch.wanted(False) is False and pch.wanted(True) is True
    monkeypatch.setenv(pch.ENV, "0")
    assert pch.wanted(True) is False
    monkeypatch.setenv(pch.ENV, "1")
    assert pch.wanted(False) is True
    assert pch.prepare(True, cuda=True) is None


@pytest.mark.slow
def test_a_compiler_that_is_not_gcc_is_said_once_and_builds_go_on_without(tmp_path: Path) -> None:
    fake = tmp_path / "bin" / "c++"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho 'clang version 18.0.0' >&2\nexit 0\n")
    fake.chmod(0o755)
    env = {**os.environ, "CXX": str(fake), pch.DIR_ENV: str(tmp_path / "pch"), pch.ENV: "1"}
    run = subprocess.run([sys.executable, "-m", "gatekeeper.build.pch"], capture_output=True, text=True, env=env,
                         timeout=300)
    assert run.returncode == 1
    assert "is not GCC" in run.stderr and "Traceback" not in run.stderr
    assert [p.name for p in (tmp_path / "pch").glob("*/failed.txt")] == ["failed.txt"]
    again = subprocess.run([sys.executable, "-m", "gatekeeper.build.pch"], capture_output=True, text=True, env=env,
                           timeout=300)
    assert again.returncode == 1 and "is not GCC" in again.stderr  # remembered, not retried
