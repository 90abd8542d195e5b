"""The parent's own folder for the transfer files it adopts (sandbox/spill.py).

An adopted file is moved here out of the worker's folder rather than unlinked, so that it
keeps a name the parent alone can use: the file can then be handed on to the next worker by
a rename instead of a copy. One folder per process and temp root, 0700; a RunGuard's root is
removed with its run, even after a kill -9, and a normal exit removes the folder too.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from typing import Optional


class ReplacedFile(OSError):
    """The name taken no longer led to the file that was opened and checked."""


_HELD: dict[tuple[int, str], str] = {}  # (pid, temp root) -> this process's held folder there


def _held_folder() -> Optional[str]:
    """The parent's own folder for adopted files, one per process and temp root (a RunGuard's
    root is removed with the run, even after a kill -9); None where none can be made."""
    key = (os.getpid(), tempfile.gettempdir())
    folder = _HELD.get(key)
    if folder is None or not os.path.isdir(folder):
        try:
            folder = tempfile.mkdtemp(prefix="gk-held-")
        except OSError:
            return None
        if not _HELD:
            atexit.register(_remove_held)
        _HELD[key] = folder
    return folder


def _remove_held() -> None:
    for (pid, _), folder in list(_HELD.items()):
        if pid == os.getpid():  # never a folder the parent of a forked process still uses
            shutil.rmtree(folder, ignore_errors=True)


def same_file(found: os.stat_result, fd: int) -> bool:
    """`found` (a stat of a name) is the file open as `fd`."""
    mine = os.fstat(fd)
    return (found.st_dev, found.st_ino) == (mine.st_dev, mine.st_ino)


def take_name(fd: int, name: str, folder: str, dir_fd: Optional[int]) -> Optional[str]:
    """Take the worker's file away from its folder: moved into the held folder (its path
    returned) or unlinked (None). Either way no name of it is left where the worker was."""
    source = os.path.join(folder, name) if dir_fd is None else name
    held = _held_folder()
    if held is not None:
        target = os.path.join(held, name)
        try:
            os.rename(source, target, src_dir_fd=dir_fd)
        except OSError:
            pass
        else:
            if not same_file(os.stat(target, follow_symlinks=False), fd):
                os.unlink(target)
                raise ReplacedFile(f"transfer file {name} was replaced while it was adopted")
            return target
    os.unlink(source, dir_fd=dir_fd)
    return None
