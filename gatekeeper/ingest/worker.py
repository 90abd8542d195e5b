"""A worker process: reads tasks as JSON lines on stdin, checks each with
gatekeeper.api.check, writes one JSON line per task on its protocol channel.

Run as `python -m gatekeeper.ingest.worker`. The first line is the set-up (configuration,
last stage, memory cap). The worker itself never imports submission code (the pipeline's
later stages run it in their own sandboxed processes), but its stdout is still moved off
the protocol channel so that nothing a stage prints can corrupt it.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


def _protocol_channel():
    channel = os.fdopen(os.dup(1), "w", encoding="utf-8", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return channel


def _cap_memory(megabytes: int) -> None:
    try:
        import resource

        limit = megabytes * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    except (ImportError, ValueError, OSError):
        pass  # best effort: the per-task wall clock still bounds the worker


def check_task(task: dict, stages: str, config) -> dict:
    """Check one task ({i, code, problem}) and return the reply: {i, report} or {i, error}.
    The one per-submission function of every executor (this worker, the Ray tasks)."""
    from gatekeeper.api import check
    from gatekeeper.errors import GatekeeperError

    message: dict = {"i": task["i"]}
    try:
        report = check(task["code"], problem=Path(task["problem"]), stages=stages, config=config)
        message["report"] = report.model_dump(mode="json")
    except GatekeeperError as exc:
        message["error"] = str(exc)
    except Exception as exc:  # the gatekeeper's own fault: say so, keep serving
        message["error"] = f"internal error while checking: {type(exc).__name__}: {exc}"
    return message


def main() -> int:
    from gatekeeper.sandbox.lifeline import die_with_parent

    die_with_parent()  # a killed `ingest` takes its workers (and their sandboxes) with it
    channel = _protocol_channel()
    setup_line = sys.stdin.readline()
    if not setup_line:
        return 0
    setup = json.loads(setup_line)
    if setup.get("memory_mb"):
        _cap_memory(int(setup["memory_mb"]))

    import gatekeeper.api  # noqa: F401  (heavy imports before "ready", not inside the first task's timeout)
    from gatekeeper.config import Config

    config = Config.model_validate(setup["config"])
    stages = setup["stages"]
    channel.write(json.dumps({"ready": os.getpid()}) + "\n")
    for line in sys.stdin:
        channel.write(json.dumps(check_task(json.loads(line), stages, config)) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
