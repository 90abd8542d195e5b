"""The sandbox worker: real subprocesses, real pipes, real limits."""

import os
import tempfile

import pytest

from gatekeeper.sandbox import detect, run_job

pytestmark = pytest.mark.slow  # starts sandboxed worker processes

TIMEOUTS = {"import": 3, "call": 3, "work": 10}


def _code(code, **kw):
    return run_job("gatekeeper.sandbox.selftest:run_code", {"code": code}, timeouts=TIMEOUTS,
                   default_timeout_s=20, **kw)


def test_echo_round_trip_with_bytes_and_scrubbed_env(monkeypatch):
    monkeypatch.setenv("GK_SECRET_TOKEN", "do-not-leak")
    result = run_job("gatekeeper.sandbox.selftest:echo", {"value": [1, "a"], "data": b"\x00\xffxyz"},
                     timeouts=TIMEOUTS)
    assert result.status == "ok", result
    echo = result.first("echo")
    assert echo["value"] == [1, "a"] and echo["data"] == b"\x00\xffxyz"
    assert "GK_SECRET_TOKEN" not in echo["env"]
    assert os.path.basename(echo["cwd"]).startswith("tmp")  # a neutral name: nothing says "check"
    assert not os.path.exists(echo["cwd"])  # private dir removed


def test_normal_result():
    result = _code("result = 6 * 7")
    assert result.status == "ok" and result.first("result")["value"] == 42


@pytest.mark.parametrize("code", [
    "import os; os._exit(0)",
    "import sys; sys.exit(0)",
    "print('{\"verdict\": \"pass\", \"kind\": \"done\"}'); import os; os._exit(0)",
    "import ctypes; ctypes.string_at(0)",
    "import os\nfor fd in range(3, 256):\n    try: os.close(fd)\n    except OSError: pass\nresult = 1",
])
def test_early_exit_fake_output_and_crash_are_never_ok(code):
    result = _code(code)
    assert result.first("result") is None
    # Either the process died without its signed done frame, or the job caught the exit.
    assert result.status == "crashed" or result.first("error") is not None, result


def test_forged_frames_are_detected():
    code = ("import os, struct\n"
            "for fd in range(3, 64):\n"
            "    try: os.write(fd, struct.pack('>Q', 5) + b'x' * 32 + b'hello')\n"
            "    except OSError: pass\n")
    result = _code(code)
    assert result.status in ("forged", "crashed"), result
    assert result.status != "ok"


def test_hang_times_out_with_phase():
    result = _code("import time\nwhile True: time.sleep(0.1)")
    assert result.status == "timeout" and result.phase == "import"


def test_error_is_reported_with_traceback():
    result = _code("raise ValueError('boom in init')")
    assert result.status == "ok"
    error = result.first("error")
    assert error["type"] == "ValueError" and "boom in init" in error["message"]
    assert '"<untrusted>", line 1' in error["traceback"]  # frames only: the message is quoted once, capped


def test_memory_cap_stops_large_allocation():
    result = _code("x = bytearray(4 * 1024 ** 3)\nresult = len(x)", memory_mb=1024)
    assert result.first("result") is None
    assert result.first("error")["type"] == "MemoryError"


def test_writes_outside_private_dir_are_refused(tmp_path):
    target = tmp_path / "escape.txt"
    result = _code(f"open({str(target)!r}, 'w').write('x')")
    assert not target.exists()
    assert result.first("violation")["event"] == "write"
    allowed = _code("open('inside.txt', 'w').write('x'); result = 'ok'")
    assert allowed.first("result")["value"] == "ok"


def test_isolation_is_detected_and_blocks_network_when_available():
    isolation = detect()
    assert isolation.name in ("bwrap", "unshare", "none")
    result = _code("import socket\ns = socket.socket()\ns.settimeout(2)\n"
                   "try:\n    s.connect(('1.1.1.1', 80)); result = 'connected'\n"
                   "except OSError as e:\n    result = 'blocked'\n")
    assert result.isolation == isolation.name
    assert result.first("result")["value"] == "blocked"


def test_late_feed_reaches_the_job():
    from gatekeeper.sandbox import Job

    job = Job("gatekeeper.sandbox.selftest:run_code_then_receive", {"code": "x = 1"},
              timeouts={"import": 5, "wait": 10}, keep_stdin=True)
    job.feed({"data": b"\x01" * 300_000})
    result = job.wait()
    assert result.status == "ok" and result.first("received")["size"] == 300_000


def test_feeding_a_worker_hung_at_import_does_not_block_the_parent():
    from gatekeeper.sandbox import Job

    job = Job("gatekeeper.sandbox.selftest:run_code_then_receive",
              {"code": "import time\nwhile True: time.sleep(0.1)"}, timeouts={"import": 2, "wait": 10},
              keep_stdin=True)
    job.feed({"data": b"\x00" * 2_000_000})  # far more than a pipe buffer
    result = job.wait()
    assert result.status == "timeout" and result.phase == "import"


def test_worker_dies_with_its_parent(tmp_path):
    import subprocess
    import sys
    import time

    marker = tmp_path / "pid"
    untrusted = (f"import os\nopen({str(marker)!r}, 'w').write(str(os.getpid()))\n"
                 "import time\nwhile True: time.sleep(0.1)\n")
    code = ("from gatekeeper.sandbox import run_job\n"
            f"run_job('gatekeeper.sandbox.selftest:run_code', {{'code': {untrusted!r}}}, "
            f"timeouts={{'import': 60}}, write_roots=[{str(tmp_path)!r}])\n")
    # The pid the worker sees is a host pid only without a pid namespace (tests/test_hostile.py
    # covers the namespaced levels).
    parent = subprocess.Popen([sys.executable, "-c", code], env={**os.environ, "GATEKEEPER_ISOLATION": "none"})
    deadline = time.monotonic() + 60
    while not (marker.exists() and marker.read_text()) and time.monotonic() < deadline:
        time.sleep(0.1)
    worker = int(marker.read_text())
    parent.kill()
    parent.wait()
    for _ in range(50):
        try:
            os.kill(worker, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    os.kill(worker, 9)
    raise AssertionError("the worker outlived its parent")


@pytest.mark.parametrize("level", ["bwrap", "unshare", "none"])
def test_tmpdir_exists_and_is_writable_inside_every_isolation_level(monkeypatch, level):
    """nvcc writes its intermediates to $TMPDIR and, unlike gcc, does not fall back to /tmp:
    a TMPDIR that exists only outside the sandbox fails every CUDA build."""
    monkeypatch.setenv("GATEKEEPER_ISOLATION", level)
    if detect().name != level:
        pytest.skip(f"{level} isolation is not usable on this machine")
    result = _code("import os\nd = os.environ['TMPDIR']\nopen(os.path.join(d, 'probe'), 'w').write('x')\n"
                   "result = [os.path.isdir(d), os.listdir(d)]\n")
    assert result.status == "ok", result
    assert result.first("result")["value"] == [True, ["probe"]]


def test_an_explicit_isolation_level_that_does_not_work_is_refused_not_weakened(monkeypatch, tmp_path):
    import gatekeeper
    from gatekeeper.errors import InfrastructureError
    from gatekeeper.sandbox import isolation

    monkeypatch.setenv("GATEKEEPER_ISOLATION", "bwrap")
    monkeypatch.setenv("PATH", str(tmp_path))  # a machine without bubblewrap on its PATH
    isolation._detect.cache_clear()
    try:
        with pytest.raises(InfrastructureError, match="GATEKEEPER_ISOLATION=bwrap asked for bwrap"):
            gatekeeper.check("import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n"
                             "        return x.mean(0)\n", "fixtures/problems/cpu_mean.py")
    finally:
        isolation._detect.cache_clear()
