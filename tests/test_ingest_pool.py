"""The worker pool: a worker killed mid-task, or one that hangs, costs one submission only."""

import os
import signal
from pathlib import Path

import pytest

from gatekeeper.config import Config
from gatekeeper.ingest.pool import Task, WorkerPool

pytestmark = pytest.mark.slow  # starts, hangs and kills worker processes

ROOT = Path(__file__).resolve().parent.parent
PROBLEM = str(ROOT / "fixtures" / "problems" / "seed_mean.py")
HONEST = (ROOT / "fixtures" / "submissions" / "seed_honest_generic.py").read_text()
SETUP = {"config": Config().model_dump(mode="json"), "stages": "static", "memory_mb": None}


def _tasks(count):
    return [Task(i=i, code=HONEST + f"\n_V = {i}\n", problem=PROBLEM) for i in range(count)]


def _interfering(pool, tasks, at, sig):
    """Yield the tasks; just before handing out task `at`, send `sig` to the live worker,
    which is the one that will receive it (there is one worker)."""
    for task in tasks:
        if task.i == at:
            os.kill(pool.pids[-1], sig)
        yield task


def test_a_worker_killed_mid_batch_costs_one_submission(tmp_path):
    pool = WorkerPool(SETUP, [{}], timeout_s=120)
    outcomes = {o.i: o for o in pool.run(_interfering(pool, _tasks(4), at=1, sig=signal.SIGKILL))}
    assert sorted(outcomes) == [0, 1, 2, 3]
    assert outcomes[1].report is None and "was killed by SIGKILL" in outcomes[1].error
    for i in (0, 2, 3):
        assert outcomes[i].error is None and outcomes[i].report["submission"]["sha256"]
    assert len(pool.pids) == 2  # one replacement worker, started once


def test_a_hung_worker_is_killed_at_the_deadline_and_replaced(tmp_path):
    pool = WorkerPool(SETUP, [{}], timeout_s=3)
    outcomes = {o.i: o for o in pool.run(_interfering(pool, _tasks(3), at=1, sig=signal.SIGSTOP))}
    assert "did not finish within 3 s" in outcomes[1].error
    assert outcomes[0].report is not None and outcomes[2].report is not None
    stopped = pool.pids[0]
    try:
        os.kill(stopped, 0)
        alive = True
    except ProcessLookupError:
        alive = False
    assert not alive, "the hung worker must be killed, not left behind"


def test_workers_that_cannot_start_are_an_infrastructure_error(tmp_path):
    import pytest

    from gatekeeper.errors import InfrastructureError

    bad = {**SETUP, "config": {"profile": "no-such-profile"}}  # the worker fails validating its set-up
    pool = WorkerPool(bad, [{}], timeout_s=30)
    with pytest.raises(InfrastructureError, match="die as they start"):
        list(pool.run(_tasks(2)))


def test_each_worker_gets_its_own_gpu_pin(monkeypatch):
    from gatekeeper.ingest.devices import gpu_count, worker_envs

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert worker_envs(3, 0) == [{}, {}, {}]
    assert worker_envs(1, 2) == [{"CUDA_VISIBLE_DEVICES": "0"}, {"CUDA_VISIBLE_DEVICES": "1"}]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "5,7")
    assert worker_envs(4, 2) == [{"CUDA_VISIBLE_DEVICES": "5"}, {"CUDA_VISIBLE_DEVICES": "7"}]
    assert gpu_count("static") == 0  # static work never looks for (or imports) torch
    # The pin reaches the real worker processes' environments.
    pool = WorkerPool(SETUP, [{"CUDA_VISIBLE_DEVICES": "5"}, {"CUDA_VISIBLE_DEVICES": "7"}], timeout_s=120)
    seen = {}
    for outcome in pool.run(_tasks(2)):
        for pid in pool.pids:
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            seen[pid] = [e for e in environ if e.startswith(b"CUDA_VISIBLE_DEVICES=")]
    assert sorted(v[0] for v in seen.values()) == [b"CUDA_VISIBLE_DEVICES=5", b"CUDA_VISIBLE_DEVICES=7"]
