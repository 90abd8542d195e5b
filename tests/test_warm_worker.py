"""The warm worker (gatekeeper/sandbox/warm.py, warm_fork.py): a job forked from a zygote that
has imported torch joins a sandbox bubblewrap built for it. What must hold
(docs/design-warm-worker.md): the job's view equals a freshly started bubblewrap worker's, two
jobs share nothing, a sandbox that cannot be joined runs no job, the memory cap sees the job,
and killing the parent leaves neither the zygote nor a job behind. Real bubblewrap, real
forks; skipped where bubblewrap does not work."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Optional

import pytest

from gatekeeper.sandbox import warm
from gatekeeper.sandbox.isolation import _detect
from gatekeeper.sandbox.runner import Job

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(_detect("auto").name != "bwrap", reason="needs a working bubblewrap")]

ROOT = Path(__file__).resolve().parents[1]


def _run(job: str, params: dict, warm_on: bool, monkeypatch, **kwargs) -> tuple[Job, object]:
    monkeypatch.setenv("GATEKEEPER_WARM_WORKER", "1" if warm_on else "0")
    started = Job(job, params, timeouts={}, default_timeout_s=60, **kwargs)
    result = started.wait()
    if warm_on:
        _skip_if_the_kernel_refused(started.warm_child is not None, warm.last_failure[0])
    return started, result


def _skip_if_the_kernel_refused(warm_started: bool, why: Optional[str]) -> None:
    """The kernel refused the join itself (setns or pidfd_open: an old kernel, a seccomp
    filter): the job ran fresh, as it must, and there is no warm worker here to test."""
    if not warm_started and "refused:" in (why or "") and "is not the sandbox" not in (why or ""):
        pytest.skip(f"this machine does not let a process join a bubblewrap sandbox: {why}")


def _view(result) -> dict:
    assert result.status == "ok", (result.status, result.detail, result.stderr_tail)
    return next(m for m in result.messages if m.get("kind") == "view")


def _normalised(view: dict) -> dict:
    """The view with the job's own folder written as WORK (each job has a fresh one)."""
    work = view["cwd"]
    text = json.dumps({k: v for k, v in view.items() if k not in ("namespaces", "kind")}).replace(work, "WORK")
    found = json.loads(text)
    found["env"].pop("GATEKEEPER_JOB")  # a fresh tag per job
    return found


def test_a_warm_job_sees_what_a_fresh_bubblewrap_worker_sees(tmp_path, monkeypatch):
    params = {"outside": str(tmp_path)}
    warm_job, warm_result = _run("gatekeeper.sandbox.selftest:describe_sandbox", params, True, monkeypatch)
    cold_job, cold_result = _run("gatekeeper.sandbox.selftest:describe_sandbox", params, False, monkeypatch)
    assert warm_job.warm_child is not None, warm.disabled_reason  # it really was forked
    assert cold_job.warm_child is None
    hot, cold = _normalised(_view(warm_result)), _normalised(_view(cold_result))
    # Known and documented differences: torch is already imported (the point of it), and the
    # holder (/bin/sh) is a process of the sandbox, so the job is pid 3, not 2.
    assert hot.pop("torch_loaded") is True and cold.pop("torch_loaded") is False
    assert hot.pop("processes") == [1, 2, 3] and cold.pop("processes") == [1, 2]
    assert hot == cold
    assert set(hot["caps"].values()) == {"0000000000000000"} and hot["no_new_privs"] == "1"
    assert hot["network"] != "reached" and hot["outside"] != "written"
    assert not (tmp_path / "written-from-the-job").exists()
    own = {name: os.readlink(f"/proc/self/ns/{name}") for name in ("user", "mnt", "pid", "net", "ipc", "uts")}
    spaces = _view(warm_result)["namespaces"]
    assert all(spaces[name] != own[name] for name in own), spaces


@pytest.mark.parametrize("env", [{"OMP_NUM_THREADS": "1"}, None])
def test_a_warm_job_gets_the_thread_count_its_environment_asks_for(env, monkeypatch):
    # The OpenMP runtime reads OMP_NUM_THREADS when torch loads it, in the zygote: a job that
    # sets it (the reference and timing jobs do) must still run on that many threads.
    params = {"outside": "/nonexistent"}
    job, hot = _run("gatekeeper.sandbox.selftest:describe_sandbox", params, True, monkeypatch, env=env)
    _, cold = _run("gatekeeper.sandbox.selftest:describe_sandbox", params, False, monkeypatch, env=env)
    assert job.warm_child is not None
    assert _view(hot)["threads"] == _view(cold)["threads"]
    if env:
        assert _view(hot)["threads"] == 1


def test_two_warm_jobs_share_nothing(monkeypatch):
    leave = textwrap.dedent("""
        import os, subprocess
        # native code, below the audit hook: a file in /tmp and a detached sleeper
        subprocess.run(["/bin/sh", "-c", "echo x > /tmp/left-by-the-first-job; setsid sleep 300 &"], check=True)
        result = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
    """)
    look = textwrap.dedent("""
        import os
        result = [os.path.exists("/tmp/left-by-the-first-job"), sorted(int(p) for p in os.listdir("/proc") if p.isdigit())]
    """)
    first_job, first = _run("gatekeeper.sandbox.selftest:run_code", {"code": leave}, True, monkeypatch)
    second_job, second = _run("gatekeeper.sandbox.selftest:run_code", {"code": look}, True, monkeypatch)
    assert first_job.warm_child and second_job.warm_child and first_job.warm_child != second_job.warm_child
    assert first.status == "ok" and second.status == "ok", (first.detail, second.detail)
    seen_first = next(m["value"] for m in first.messages if m.get("kind") == "result")
    assert len(seen_first) == 4  # init, holder, the job, its sleeper
    assert next(m["value"] for m in second.messages if m.get("kind") == "result") == [False, [1, 2, 3]]


def test_a_job_that_signals_every_process_it_can_reaches_neither_the_zygote_nor_the_next_job(monkeypatch):
    # kill(-1, SIGKILL) from native code, as root in its user namespace: under bubblewrap it
    # reaches only its own pid namespace (the zygote and its children are outside it).
    code = "import subprocess\nsubprocess.run(['/bin/sh', '-c', 'kill -9 -1'])\nresult = 1\n"
    job, killed = _run("gatekeeper.sandbox.selftest:run_code", {"code": code}, True, monkeypatch)
    assert job.warm_child is not None and killed.status != "ok"
    assert job.warm_zygote is not None and _alive(job.warm_zygote)
    after, result = _run("gatekeeper.sandbox.selftest:echo", {"value": 7}, True, monkeypatch)
    assert after.warm_child is not None and after.warm_zygote == job.warm_zygote
    assert result.status == "ok" and next(m for m in result.messages if m.get("kind") == "echo")["value"] == 7


def test_a_job_whose_environment_changed_gets_a_zygote_of_its_own(tmp_path):
    # A long-lived process whose environment changes after its first job (a library caller
    # sets CXX, a test monkeypatches it) keeps running jobs warm: a zygote per environment,
    # each reused when that environment comes back. In a fresh interpreter, so the pool of
    # zygotes is this test's alone.
    script = tmp_path / "env_change.py"
    script.write_text(textwrap.dedent(f"""
        import json, os, sys
        sys.path.insert(0, {str(ROOT)!r})
        from gatekeeper.sandbox import warm
        from gatekeeper.sandbox.runner import Job

        def run(cxx):
            os.environ["CXX"] = cxx
            job = Job("gatekeeper.sandbox.selftest:run_code",
                      {{"code": "import os\\nresult = os.environ.get('CXX')"}}, timeouts={{}}, default_timeout_s=60)
            result = job.wait()
            seen = next((m["value"] for m in result.messages if m.get("kind") == "result"), None)
            return [job.warm_zygote, job.warm_child is not None, seen, warm.last_failure[0]]

        print(json.dumps([run("c++"), run("g++"), run("c++")]), flush=True)
    """), "utf-8")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, GATEKEEPER_WARM_WORKER="1"))
    assert done.returncode == 0, done.stderr[-3000:]
    first, second, third = json.loads(done.stdout.strip().splitlines()[-1])
    _skip_if_the_kernel_refused(first[1], first[3])
    assert first[1] and second[1] and third[1], (first, second, third)  # all three warm
    assert [first[2], second[2], third[2]] == ["c++", "g++", "c++"]  # each saw its own environment
    assert first[0] != second[0] and third[0] == first[0]


def test_a_sandbox_that_cannot_be_joined_runs_no_job():
    # The zygote is asked to join "the sandbox" of a process that is not a child of the named
    # bubblewrap (this test's own pid): the child refuses before any job code, so no
    # acknowledgement comes and the holder is told exit status 1.
    zygote = warm._Zygote({"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/nonexistent"})
    pipes = [os.pipe() for _ in range(6)]
    try:
        request = {"sandbox_pid": os.getpid(), "holder_pid": os.getppid() + 1000000, "workdir": "/", "env": {}}
        stdin, stdout, stderr, result, status, ack = pipes
        zygote.fork(request, [stdin[0], stdout[1], stderr[1], result[1], status[1], ack[1]])
        for _, write_end in pipes:
            os.close(write_end)
        said = os.read(ack[0], 300)  # the child says why, and nothing joined
        assert said.startswith(b"refused: ") and b"is not the sandbox of bubblewrap" in said, said
        assert os.read(status[0], 16) == b"1\n"
        assert os.read(result[0], 16) == b""  # no frame of a job
    finally:
        zygote.close()
        for read_end, _ in pipes:
            os.close(read_end)


def test_the_memory_cap_counts_a_warm_jobs_memory(monkeypatch):
    grow = "import time\nblocks = []\nfor _ in range(40):\n    blocks.append(bytearray(32 << 20))\n    time.sleep(0.05)\nresult = 1\n"
    job, result = _run("gatekeeper.sandbox.selftest:run_code", {"code": grow}, True, monkeypatch,
                       memory_mb=400, cap_address_space=False)
    assert job.warm_child is not None
    assert result.status == "memory", (result.status, result.detail)


def test_killing_the_parent_leaves_no_zygote_and_no_job(tmp_path):
    script = tmp_path / "parent.py"
    script.write_text(textwrap.dedent(f"""
        import json, sys, time
        sys.path.insert(0, {str(ROOT)!r})
        from gatekeeper.sandbox import warm
        from gatekeeper.sandbox.runner import Job
        job = Job("gatekeeper.sandbox.selftest:run_code", {{"code": "import time\\ntime.sleep(600)"}},
                  timeouts={{}}, default_timeout_s=900)
        time.sleep(2)
        print(json.dumps({{"zygote": job.warm_zygote, "child": job.warm_child,
                          "holder": job.proc.pid, "why": warm.last_failure[0]}}), flush=True)
        time.sleep(600)
    """), "utf-8")
    env = dict(os.environ, GATEKEEPER_WARM_WORKER="1")
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, env=env)
    try:
        line = parent.stdout.readline()
        pids = json.loads(line)
        why = pids["why"] or ""
        if not pids["child"] and "refused:" in why and "is not the sandbox" not in why:
            pytest.skip(f"this machine does not let a process join a bubblewrap sandbox: {why}")
        assert pids["child"], line
        job_pids = Path(f"/proc/{pids['child']}/task/{pids['child']}/children").read_text().split()
        assert job_pids, "the job is not running"
        watched = [pids["zygote"], pids["child"], pids["holder"], *map(int, job_pids)]
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and any(_alive(pid) for pid in watched):
            time.sleep(0.2)
        assert not [pid for pid in watched if _alive(pid)]
    finally:
        if parent.poll() is None:
            parent.kill()


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.gpu
def test_a_warm_job_initialises_cuda_after_the_fork(monkeypatch):
    job, result = _run("gatekeeper.sandbox.selftest:cuda_after_fork", {}, True, monkeypatch, cap_address_space=False)
    assert job.warm_child is not None, warm.disabled_reason
    assert result.status == "ok", (result.detail, result.stderr_tail)
    found = next(m for m in result.messages if m.get("kind") == "cuda")
    assert found["initialized_before"] is False  # the zygote never initialised CUDA
    assert found["total"] == float(sum(range(1 << 10)) * 2)
