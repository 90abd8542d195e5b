"""The Ray executor: the same tasks as the local pool, each checked as a Ray task.

`RayPool.run` has the local pool's contract (tasks in, outcomes out), so planning, the
store, dedupe and resume are shared. Each Ray task calls `worker.check_task`, the function
the local worker runs. Ray is imported only here, only when `--executor ray` is chosen.

A kill -9 of ingest leaves nothing running (issue 12, row 5), as with the local pool: the
run is under a `RunGuard` (gatekeeper/sandbox/lifeline.py) whose run tag and temp root are
in the environment before `ray.init`, so a local Ray instance (GCS, raylet, its workers)
and everything they start (sandboxes, compilers in their own process groups, `setsid`
children) carry the tag, and the guard's watcher SIGKILLs them and removes the temp root
when ingest ends in any way. Tasks on a cluster (`--address`) get the tag through the job's
runtime environment; only processes on this machine can be reaped from here.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from typing import Iterable, Iterator, Optional

from gatekeeper.distribution import pip_install
from gatekeeper.errors import InfrastructureError, UsageError
from gatekeeper.ingest.pool import Outcome, Task
from gatekeeper.sandbox.lifeline import RunGuard, guarded_run

INSTALL_HINT = pip_install("ray")
_ADOPT_EVERY_S = 5.0  # a scan of /proc for Ray's new processes, at most this often


def import_ray():
    """Import ray, or say how to install it (a usage error: exit 2)."""
    try:
        import ray
    except ImportError as exc:
        raise UsageError(f"--executor ray needs the ray package, which cannot be imported ({exc}); "
                         f"install it with: {INSTALL_HINT}, or drop --executor ray to use the local pool") from None
    return ray


def _check_remote(task: dict, stages: str, config_data: dict) -> dict:
    from gatekeeper.config import Config
    from gatekeeper.ingest.worker import check_task

    return check_task(task, stages, Config.model_validate(config_data))


class RayPool:
    """Keeps at most `slots` Ray tasks in flight, so that a task's clock starts about when
    it starts running (Ray queues the rest), and cancels any task past its deadline."""

    def __init__(self, setup: dict, *, jobs: int, timeout_s: float, address: Optional[str], stages: str):
        self.ray = import_ray()
        self.setup = setup
        self.jobs = jobs
        self.timeout_s = timeout_s
        self.address = address
        self.stages = stages
        self.resources: dict[str, float] = {}
        self.slots = jobs
        self.run_env: dict[str, str] = {}
        self.guard: Optional[RunGuard] = None
        self._adopted_at = -_ADOPT_EVERY_S

    def _connect(self) -> None:
        ray = self.ray
        # The run tag reaches task workers on other machines too (TMPDIR does not: the guard's
        # temp root exists only here).
        runtime_env = {"env_vars": self.run_env} if self.run_env else None
        try:
            if self.address:
                ray.init(address=self.address, include_dashboard=False, log_to_driver=False,
                         logging_level=logging.WARNING, runtime_env=runtime_env)
            else:
                ray.init(num_cpus=self.jobs, include_dashboard=False, log_to_driver=False,
                         logging_level=logging.WARNING, runtime_env=runtime_env)
        except Exception as exc:  # no cluster at that address, a port in use, ...
            where = f"the Ray cluster at {self.address}" if self.address else "a local Ray instance"
            raise InfrastructureError(f"cannot start or reach {where}: {type(exc).__name__}: {exc}") from None
        self.resources = dict(ray.cluster_resources())
        self._adopt_local_ray()

    def wants_gpu(self) -> bool:
        """One GPU per task for timing; for behaviour when the cluster has GPUs (the stage then
        runs on one); CPU otherwise."""
        if self.stages == "timing":
            return True
        return self.stages == "behaviour" and self.resources.get("GPU", 0) > 0

    def run(self, tasks: Iterable[Task]) -> Iterator[Outcome]:
        with _guarded() as guard:
            self.guard = guard
            self.run_env = {guard.var: guard.token}
            yield from self._run(tasks)

    def _adopt_local_ray(self) -> None:
        """A local Ray instance's processes, for the guard's watcher: the GCS and the raylet
        carry the run tag, but the agents the raylet starts rewrite their title and with it
        /proc's view of their environment, and they outlive a raylet killed with ingest."""
        guard = self.guard
        if guard is None or self.address or time.monotonic() - self._adopted_at < _ADOPT_EVERY_S:
            return
        self._adopted_at = time.monotonic()
        from gatekeeper.sandbox.reaper import with_descendants

        watcher = guard.watcher.pid if guard.watcher is not None else -1
        guard.adopt(pid for pid in with_descendants([os.getpid()]) if pid != watcher)

    def _run(self, tasks: Iterable[Task]) -> Iterator[Outcome]:
        ray = self.ray
        self._connect()
        try:
            gpu = self.wants_gpu()
            if gpu and self.resources.get("GPU", 0) < 1:
                raise InfrastructureError("--stages timing asks one GPU per Ray task, but the Ray cluster has none; "
                                          "connect with --address to a cluster with GPUs")
            if self.address:  # a cluster: as many in flight as it can run at once
                self.slots = max(1, int(self.resources.get("GPU" if gpu else "CPU", 1)))
            options = {"num_gpus": 1} if gpu else {"num_cpus": 1}
            # max_retries=0: a crash is recorded for its submission, not re-run behind our back.
            remote = ray.remote(max_retries=0, **options)(_check_remote)
            config_ref = ray.put(self.setup["config"])
            yield from self._drive(remote, config_ref, iter(tasks))
        finally:
            ray.shutdown()

    def _drive(self, remote, config_ref, pending: Iterator[Task]) -> Iterator[Outcome]:
        ray = self.ray
        flight: dict = {}  # ObjectRef -> (task, submitted at)
        exhausted = False
        while True:
            while not exhausted and len(flight) < self.slots:
                task = next(pending, None)
                if task is None:
                    exhausted = True
                    break
                ref = remote.remote({"i": task.i, "code": task.code, "problem": task.problem},
                                    self.setup["stages"], config_ref)
                flight[ref] = (task, time.monotonic())
            if not flight:
                return
            nearest = min(started for _, started in flight.values()) + self.timeout_s
            ready, _ = ray.wait(list(flight), num_returns=1, timeout=max(0.0, nearest - time.monotonic()))
            for ref in ready:
                task, started = flight.pop(ref)
                self._adopt_local_ray()  # agents and workers Ray started since
                yield self._collect(ref, task, started)
            now = time.monotonic()
            for ref, (task, started) in list(flight.items()):
                if now - started >= self.timeout_s:
                    flight.pop(ref)
                    try:
                        ray.cancel(ref, force=True)  # kills the Ray worker running it
                    except Exception:
                        pass  # finished or gone meanwhile; the outcome is an error either way
                    yield Outcome(task.i, error=(f"the check did not finish within {self.timeout_s:g} s; its Ray "
                                                 "task was cancelled (raise --timeout if the stages need longer)"),
                                  duration_s=now - started)

    def _collect(self, ref, task: Task, started: float) -> Outcome:
        duration = time.monotonic() - started
        try:
            message = self.ray.get(ref)
        except Exception as exc:  # the Ray worker died (crash, memory) or the task raised
            first = str(exc).strip().splitlines()[:1]
            detail = f": {first[0]}" if first else ""
            return Outcome(task.i, error=f"the Ray task checking this submission failed ({type(exc).__name__}{detail})",
                           duration_s=duration)
        if not isinstance(message, dict) or message.get("i") != task.i:
            return Outcome(task.i, error="the Ray task replied for another task", duration_s=duration)
        return Outcome(task.i, report=message.get("report"), error=message.get("error"), duration_s=duration)


@contextlib.contextmanager
def _guarded() -> Iterator[RunGuard]:
    """The run under a RunGuard, with Ray's own session folder kept where Ray would put it
    without the guard (on Linux Ray follows TMPDIR, which the guard points at its root: a
    longer path for Ray's sockets, and nothing of Ray's belongs in our temp root)."""
    saved = os.environ.get("RAY_TMPDIR")
    os.environ["RAY_TMPDIR"] = saved or os.environ.get("TMPDIR") or "/tmp"
    try:
        with guarded_run("gatekeeper-ingest-") as guard:
            yield guard
    finally:
        if saved is None:
            os.environ.pop("RAY_TMPDIR", None)
        else:
            os.environ["RAY_TMPDIR"] = saved
