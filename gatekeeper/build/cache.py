"""Where builds live: `$GATEKEEPER_CACHE_DIR` (default ~/.cache/gatekeeper)/torch_extensions/<key>,
the key being the hash of the sources, loader calls (names, flags), Python and torch versions.
A marker file says the build finished, so the next check of the same sources skips the build."""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from pathlib import Path
from typing import Iterator, Optional

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


@contextlib.contextmanager
def exclusive(folder: Optional[Path], wait_s: float = 900.0) -> Iterator[None]:
    """Hold the build folder for one worker at a time, and clear torch's stale build locks.

    torch.utils.cpp_extension guards a build directory with a `lock` file that a killed
    process leaves behind, after which every later load waits forever. While we hold this
    flock (released by the kernel even if we die), no other gatekeeper worker is inside the
    folder, so any such `lock` file is stale and is removed.
    """
    if folder is None:
        yield
        return
    handle = open(folder / ".gatekeeper-lock", "a+")
    deadline = time.monotonic() + wait_s
    try:
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"build folder {folder} is busy") from None
                time.sleep(0.2)
        for stale in folder.glob("*/lock"):
            try:
                stale.unlink()
            except OSError:
                pass
        yield
    finally:
        handle.close()
