"""A full disk is the checker's problem, never the submission's.

Large problems move their tensors between workers as files (sandbox.spill). When the disk
that holds them fills up, any process may be the one that sees ENOSPC: the reference worker,
the parent copying a file, or the submission while it reads its inputs. The first two are an
infrastructure error (exit 3) with a message that says how to make room, never a reject; the
submission's process is untrusted, so its claim counts only where the disk is really short
(behaviour.stage._believable_disk_full).
"""

from __future__ import annotations

import errno
import shutil
import tempfile
from typing import Any, Iterable, Optional

_MARKERS = ("[Errno 28]", "No space left on device", "[Errno 122]", "Disk quota exceeded",
            "not enough disk for")


def is_disk_full(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)


def mentions_disk_full(texts: Iterable[Any]) -> bool:
    """Whether any worker-reported error text is an out-of-space error."""
    return any(marker in str(text) for text in texts for marker in _MARKERS)


def free_bytes(path: Optional[str] = None) -> Optional[int]:
    try:
        return shutil.disk_usage(path or tempfile.gettempdir()).free
    except OSError:
        return None


def gib(nbytes: float) -> str:
    return f"{nbytes / (1 << 30):.1f} GiB"


def disk_full_reason(where: str, path: Optional[str] = None) -> str:
    free = free_bytes(path)
    now = f" ({gib(free)} free there now)" if free is not None else ""
    return (f"infrastructure error: the disk ran out of space while {where}, in {path or tempfile.gettempdir()}"
            f"{now}. Large problems pass their tensors between workers as files there; this is not the "
            "submission's fault. Free disk space, run fewer checks at once (--jobs), or point TMPDIR at a "
            "larger disk, then check again")
