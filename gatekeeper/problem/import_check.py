"""`--static-only` imports the problem once, in a sandboxed worker, to check that it loads.

Without it a problem that raises at import passes every static-only check with exit 0:
no later stage runs to notice. The worker imports the reference (with the shims and the
harness jitter object it may use) and checks that it defines `Model`, `get_inputs` and
`get_init_inputs`; it calls none of them. A problem that loads is remembered by its
content (in this process, and on disk under the gatekeeper cache), so a batch pays one
worker per problem, and a second run none.
"""

from __future__ import annotations

import hashlib
import threading
from typing import Any, Optional

from gatekeeper.errors import InfrastructureError

REQUIRED = ("Model", "get_inputs", "get_init_inputs")
_OK: set[str] = set()
_LOCK = threading.Lock()
TRUSTED_START_S = 120.0  # python + torch on a busy machine, before any problem code runs


def _key(problem: Any) -> str:
    from gatekeeper.version import __version__

    text = "\0".join([problem.sha256, problem.format.value, __version__, _torch_version()])
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _torch_version() -> str:
    from importlib import metadata

    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return "none"


def _marker(key: str):  # type: ignore[no-untyped-def]
    from gatekeeper.build.cache import cache_root

    return cache_root() / "problems_loaded" / key


class Pending:
    """A started import check: `wait()` raises InfrastructureError (exit 3) when the problem
    fails to import or lacks a name; `close()` stops a worker nobody waits for."""

    def __init__(self, problem: Any, key: str, job: Any) -> None:
        self.problem, self.key, self.job = problem, key, job

    def wait(self) -> None:
        result, self.job = self.job.wait(), None
        where = self.problem.folder or self.problem.path
        failed = result.first("problem-error")
        if failed is not None:
            raise InfrastructureError(f"problem error: {where} {failed['what']}; fix the problem file "
                                      "(every check against it would be meaningless)")
        if result.status != "ok":
            raise InfrastructureError(f"problem error: importing {where} in a worker ended with '{result.status}' "
                                      f"in phase '{result.phase}': {result.detail or result.stderr_tail[-400:]}")
        with _LOCK:
            _OK.add(self.key)
        marker = _marker(self.key)
        try:
            marker.parent.mkdir(parents=True, exist_ok=True)
            marker.write_text(str(where), "utf-8")
        except OSError:
            pass  # a read-only cache only costs the next run another worker

    def close(self) -> None:
        if self.job is not None:
            self.job.kill()
            self.job = None


def start_import_check(problem: Any, config: Any) -> Optional[Pending]:
    """Start the worker (the static stage runs meanwhile), or None when this problem is known
    to load."""
    key = _key(problem)
    with _LOCK:
        if key in _OK:
            return None
    if _marker(key).is_file():
        with _LOCK:
            _OK.add(key)
        return None
    from gatekeeper.sandbox import Job

    limits = config.limits
    start = max(limits.import_timeout_s, TRUSTED_START_S)
    job = Job("gatekeeper.problem.import_check:import_job",
              {**problem.describe(), "source": problem.source, "jitter_names": list(config.jitter.names)},
              timeouts={"start": start, "import": start}, default_timeout_s=start, memory_mb=limits.memory_mb,
              cap_address_space=False, env={"OMP_NUM_THREADS": "1"})
    return Pending(problem, key, job)


def check_imports(problem: Any, config: Any) -> None:
    """Raise InfrastructureError (exit 3) when the problem fails to import or lacks a name."""
    pending = start_import_check(problem, config)
    if pending is not None:
        try:
            pending.wait()
        finally:
            pending.close()


def import_job(params: dict[str, Any], channel: Any) -> None:
    """In the worker: import the reference, as the behaviour stage's reference worker does."""
    import traceback

    channel.phase("import")
    from gatekeeper.problem.jitter import Jitter, JitterSpec
    from gatekeeper.problem.shims import install_shims
    from gatekeeper.sandbox.loading import load_module

    install_shims()
    jitter = Jitter(JitterSpec())
    try:
        module = load_module(params["problem"], "gk_problem_check", params.get("source"),
                             {n: jitter for n in params["jitter_names"]})
    except BaseException as exc:  # noqa: BLE001 - SystemExit at import is a broken problem too
        tail = traceback.extract_tb(exc.__traceback__)
        line = next((f" (line {f.lineno})" for f in reversed(tail) if f.filename == params["problem"]), "")
        channel.send("problem-error", what=f"raises {type(exc).__name__} at import{line}: {str(exc)[:300]}")
        return
    missing = [name for name in REQUIRED if not callable(getattr(module, name, None))]
    if missing:
        channel.send("problem-error", what=f"defines no {', '.join(missing)} (a {params['format']} problem "
                     f"defines {', '.join(REQUIRED)})")
