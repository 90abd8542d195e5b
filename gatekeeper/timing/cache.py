"""The calibration cache: one JSON file per device, driver and torch version, so the
ceilings are measured once and not on every check."""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any, Optional


def default_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "gatekeeper" / "timing"


# What a calibration measures; a new version is measured again rather than read from an old
# file. 2: the float32 matrix rate on TF32 tensor cores as well (timing/calibrate.py).
MEASURES = 2


def key(device_name: str, driver: str, torch_version: str) -> str:
    readable = re.sub(r"[^A-Za-z0-9.]+", "-", f"{device_name}-{driver}-{torch_version}").strip("-")[:80]
    digest = hashlib.sha256(f"{device_name}\0{driver}\0{torch_version}\0{MEASURES}".encode()).hexdigest()[:12]
    return f"{readable}-{digest}"


def load(folder: Path, cache_key: str) -> Optional[dict[str, Any]]:
    path = folder / f"{cache_key}.json"
    try:
        data = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return None  # missing or corrupt: measure again
    return data if isinstance(data, dict) and data.get("key") == cache_key else None


def store(folder: Path, cache_key: str, values: dict[str, Any]) -> Optional[Path]:
    """Written atomically; a read-only or full disk only costs a re-measurement next time."""
    path = folder / f"{cache_key}.json"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({**values, "key": cache_key}, indent=1, sort_keys=True), "utf-8")
        tmp.replace(path)
    except OSError:
        return None
    return path
