"""Where builds live: `$GATEKEEPER_CACHE_DIR` (default ~/.cache/gatekeeper)/torch_extensions/<key>,
the key being the hash of the sources, loader calls (names, flags), Python and torch versions.
A marker file says the build finished, so the next check of the same sources skips the build."""

from __future__ import annotations

import os
from pathlib import Path

MARKER = ".gatekeeper-built"


def cache_root() -> Path:
    given = os.environ.get("GATEKEEPER_CACHE_DIR")
    root = Path(given) if given else Path.home() / ".cache" / "gatekeeper"
    return root.expanduser().resolve()


def extensions_dir(key: str) -> Path:
    path = cache_root() / "torch_extensions" / key
    path.mkdir(parents=True, exist_ok=True)
    return path


def is_built(key: str) -> bool:
    return (cache_root() / "torch_extensions" / key / MARKER).is_file()


def mark_built(key: str) -> None:
    (extensions_dir(key) / MARKER).write_text("ok\n")


def cuda_present() -> bool:
    """A cheap probe the parent can afford: an NVIDIA device node (no torch import)."""
    if os.environ.get("GATEKEEPER_ASSUME_CUDA") in ("0", "1"):
        return os.environ["GATEKEEPER_ASSUME_CUDA"] == "1"
    return os.path.exists("/dev/nvidiactl") or any(Path("/dev").glob("nvidia[0-9]*"))
