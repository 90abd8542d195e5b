"""Tiny jobs that exercise the sandbox itself (used by tests and the benchmark)."""

from __future__ import annotations

import os
import sys
import time
from typing import Any


def echo(params: dict[str, Any], channel: Any) -> None:
    channel.phase("work")
    channel.send("echo", value=params.get("value"), data=params.get("data", b""), cwd=os.getcwd(),
                 env=sorted(os.environ))


def run_code(params: dict[str, Any], channel: Any) -> None:
    """Runs untrusted-style code given as text (stands in for a submission in tests)."""
    channel.phase("import")
    namespace: dict[str, Any] = {}
    exec(compile(params["code"], "<untrusted>", "exec"), namespace)
    channel.phase("call")
    result = namespace.get("result")
    channel.send("result", value=result)
