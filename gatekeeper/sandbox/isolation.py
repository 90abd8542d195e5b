"""Which OS isolation the sandbox can use on this machine, detected once per process.

Order of preference: bubblewrap (new user, network, pid namespaces), then `unshare -rn`
(new user and network namespace: no network), then none. The name of the one in force
goes into the report (environment.isolation).
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from dataclasses import dataclass


@dataclass(frozen=True)
class Isolation:
    name: str  # "bwrap-net" | "unshare-net" | "none"
    prefix: tuple[str, ...]  # argv prefix that wraps the worker command
    detail: str


def _works(argv: list[str]) -> bool:
    try:
        done = subprocess.run(argv + ["true"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


@functools.lru_cache(maxsize=1)
def detect() -> Isolation:
    if os.environ.get("GATEKEEPER_ISOLATION") == "none":
        return Isolation("none", (), "disabled by GATEKEEPER_ISOLATION=none")
    bwrap = shutil.which("bwrap")
    if bwrap:
        argv = [bwrap, "--dev-bind", "/", "/", "--unshare-net", "--unshare-pid", "--die-with-parent", "--"]
        if _works(argv):
            return Isolation("bwrap-net", tuple(argv), "bubblewrap: no network, own pid namespace")
    unshare = shutil.which("unshare")
    if unshare:
        argv = [unshare, "-rn", "--"]
        if _works(argv):
            return Isolation("unshare-net", tuple(argv), "unshare -rn: own user and network namespace, no network")
    return Isolation("none", (), "no user namespaces or bubblewrap on this machine: the network is reachable")
