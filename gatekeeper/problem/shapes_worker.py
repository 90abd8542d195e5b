"""Declared shapes that only running `shapes.py` gives: read in a sandboxed worker.

Only for the stages that run code (build, behaviour, timing): the pipeline calls
`resolve_shapes` once per check when the static read left part of the declaration unknown
(`Problem.shapes_unread`). The worker executes shapes.py with its folder on the path (a
`shapes.py` may import its sibling `reference.py`, as the benchmark's own harness allows) and
sends back SHAPES as plain JSON: integers, strings, lists and dicts; anything else becomes
null and is dropped as not a size. A static-only check never gets here; it reports the
unknown dimensions as GK007 instead.
"""

from __future__ import annotations

import hashlib
import threading
from typing import Any

from gatekeeper.errors import InfrastructureError
from gatekeeper.problem.loaded import Problem, with_shapes
from gatekeeper.problem.shapes_file import SHAPE_NAMES, shapes_from_value

TRUSTED_START_S = 120.0  # python (and torch, when shapes.py imports the reference) on a busy machine
_RESOLVED: dict[str, Problem] = {}  # a batch checks many submissions against one problem
_LOCK = threading.Lock()


def resolve_shapes(problem: Problem, config: Any) -> Problem:
    """`problem` with every declared shape, read by running shapes.py in the sandbox when the
    static read could not; the same object when there is nothing to resolve. A shapes.py that
    fails when run is a broken problem (exit 3): the benchmark's harness could not read it
    either."""
    if problem.shapes_unread is None or problem.shapes_file is None:
        return problem
    try:
        text = problem.shapes_file.read_bytes()
    except OSError as exc:
        raise InfrastructureError(f"problem file {problem.shapes_file} cannot be read: {exc.strerror}") from None
    key = hashlib.sha256(problem.sha256.encode() + b"\0" + text).hexdigest()
    with _LOCK:
        hit = _RESOLVED.get(key)
    if hit is not None:
        return hit
    value = _run_worker(problem, config)
    declared = shapes_from_value(value, problem.facts.constants, str(problem.shapes_file))
    resolved = with_shapes(problem, declared)
    with _LOCK:
        if len(_RESOLVED) >= 64:
            _RESOLVED.clear()
        _RESOLVED[key] = resolved
    return resolved


def _run_worker(problem: Problem, config: Any) -> Any:
    from gatekeeper.sandbox import run_job

    limits = config.limits
    start = max(limits.import_timeout_s, TRUSTED_START_S)
    params = {"shapes": str(problem.shapes_file.resolve()), "reference": str(problem.path.resolve())}  # type: ignore[union-attr]
    result = run_job("gatekeeper.problem.shapes_worker:shapes_job", params, timeouts={"import": start},
                     default_timeout_s=start, memory_mb=limits.memory_mb, cap_address_space=False,
                     env={"OMP_NUM_THREADS": "1"})
    failed = result.first("shapes-error")
    where = problem.shapes_file
    if failed is not None:
        raise InfrastructureError(f"problem error: {where} {failed['what']}; fix shapes.py (the benchmark's harness "
                                  "imports it the same way, so every check against this problem would be meaningless)")
    found = result.first("shapes")
    if result.status != "ok" or found is None:
        detail = result.detail or result.stderr_tail[-400:]
        raise InfrastructureError(f"problem error: reading {where} in a sandboxed worker ended with '{result.status}' "
                                  f"in phase '{result.phase}': {detail}")
    return found["value"]


def _plain(value: Any, depth: int = 0) -> Any:
    """SHAPES as JSON: dicts (string keys), lists, ints and strings; anything else is None."""
    if depth > 8:
        return None
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return int(value) if abs(value) < 2 ** 62 else None
    if isinstance(value, str):
        return value[:200]
    if isinstance(value, dict):
        return {str(k)[:200]: _plain(v, depth + 1) for k, v in list(value.items())[:1000]}
    if isinstance(value, (list, tuple)):
        return [_plain(v, depth + 1) for v in list(value)[:1000]]
    try:  # a size held in a numpy or torch integer
        import operator

        return int(operator.index(value))
    except TypeError:
        return None


def shapes_job(params: dict[str, Any], channel: Any) -> None:
    """In the worker: run shapes.py, send its SHAPES as plain JSON."""
    import os
    import sys
    import traceback

    from gatekeeper.sandbox.loading import load_module

    channel.phase("import")
    sys.path.insert(0, os.path.dirname(params["shapes"]))
    try:
        module = load_module(params["shapes"], "shapes")
    except BaseException as exc:  # noqa: BLE001 - SystemExit at import is a broken file too
        tail = traceback.extract_tb(exc.__traceback__)
        line = next((f" (line {f.lineno})" for f in reversed(tail) if f.filename == params["shapes"]), "")
        channel.send("shapes-error", what=f"raises {type(exc).__name__} when run{line}: {str(exc)[:300]}")
        return
    found = next((name for name in SHAPE_NAMES if hasattr(module, name)), None)
    channel.send("shapes", value=_plain(getattr(module, found)) if found else None)
