"""A virtual environment with gatekeeper's base dependencies and no torch, as pre-commit builds one.

`pip install -e <repo>` (no extras) into a fresh `python -m venv`, plus pre-commit. Made once
per pyproject.toml and reused across test runs (about 40 s to build on a 2-core machine):
the install is editable, so code changes need no rebuild. Tests that need it are slow.
"""

from __future__ import annotations

import fcntl
import hashlib
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parent.parent
EXTRA = ("pre-commit",)


def torchless_venv() -> tuple[Optional[Path], str]:
    """(the venv's folder, "") or (None, why it could not be built: no package index here)."""
    key = hashlib.sha256((ROOT / "pyproject.toml").read_bytes() + str(ROOT).encode() + sys.version.encode()).hexdigest()
    folder = Path(tempfile.gettempdir()) / f"gatekeeper-torchless-{key[:16]}"
    done = folder / ".complete"
    with open(Path(tempfile.gettempdir()) / f"gatekeeper-torchless-{key[:16]}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # parallel test workers build it once
        if done.is_file():
            return folder, ""
        steps = [[sys.executable, "-m", "venv", "--clear", str(folder)],
                 [str(folder / "bin" / "python"), "-m", "pip", "install", "-q", "-e", str(ROOT), *EXTRA]]
        for step in steps:
            proc = subprocess.run(step, capture_output=True, text=True, timeout=900)
            if proc.returncode != 0:
                return None, f"{' '.join(step[:4])} failed: {proc.stderr[-600:]}"
        done.write_text("ok\n")
    return folder, ""
