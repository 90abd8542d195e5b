"""Each sandboxed job runs the submission from a private, writable copy of its own files.

Why: an honest submission may write next to itself (a generated `.cu` it then compiles with
`load`, an autotune table, a cache), while the user's folder must never change. So the job
that imports the submission (build, behaviour, timing: every job whose `submission` parameter
names a file) gets a copy of the submission's bundle, the files the sandbox showed it before
(the submission, the local modules it imports, the C++/CUDA sources beside it:
isolation.bundle_sources), and `__file__` points into the copy. The copy is the job's
writable folder under every isolation level alike (a bubblewrap bind, a writable mount under
`unshare`, an audit-hook write root under `none`); the job is never pointed at the original
folder (bubblewrap does not show it), and a write anywhere else is refused and reported as
before (GK665).

What is copied is bounded: only the bundle (never the whole folder: a submission among 1,000
files in `corpus/` gets its own few files), no link that leads out of the folder, at most
FILE_BYTES per file and TOTAL_BYTES in all. A file left out is said in the error the job
then raises (`note_left_out`), never a traceback of ours.

The copy's path is stable: `<cache>/bundles/<hash of the submission's real path>-<slot>/
<folder name>/`. torch writes the source paths into its ninja file, and ninja rebuilds when
a command changes, so a path that changed per job would recompile in every job and never
share a build between checks. Slot 0 is taken whenever it is free (the jobs of one check run
one after another, and checks of other files of the same folder, as in a corpus, have slots
of their own); only a job running while another job of the same submission holds slot 0
takes the next free one, so each copy stays private. A slot is held by an flock for the
job's life and emptied before and after it: nothing one job writes reaches the next.
Copies keep the originals' modification times (ninja compares them).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Optional

FILE_BYTES = 32 * 1024 ** 2
TOTAL_BYTES = 128 * 1024 ** 2


class CopyFailed(OSError):
    """The copy could not be made (our side: the cache folder is not writable or full)."""


def bundles_root() -> Path:
    """`$GATEKEEPER_CACHE_DIR/bundles` (the build cache's root: build/cache.py reads the same
    variable; the sandbox does not import the build stage)."""
    given = os.environ.get("GATEKEEPER_CACHE_DIR")
    root = Path(given) if given else Path.home() / ".cache" / "gatekeeper"
    return root.expanduser().resolve() / "bundles"


@dataclass
class PrivateCopy:
    original: str  # the submission's folder, real path
    folder: str  # its copy: the job's writable folder
    slot: str  # the copy's parent, emptied and unlocked on release
    submission: str  # the submission file inside the copy
    copied: list[str] = field(default_factory=list)  # original paths
    left_out: dict[str, str] = field(default_factory=dict)  # original path -> why
    _lock: Optional[IO[str]] = None

    def to_original(self, value: Any) -> Any:
        """`value` (a message, a list, a string) with paths in the copy turned back into the
        user's paths, so that reports name the files the user has."""
        if isinstance(value, str):
            if self.slot not in value:
                return value
            return value.replace(self.folder, self.original).replace(self.slot, os.path.dirname(self.original))
        if isinstance(value, dict):
            return {k: self.to_original(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.to_original(v) for v in value]
        return value

    def note_left_out(self, message: dict[str, Any]) -> dict[str, Any]:
        """An error that names a file left out of the copy says why the file is missing."""
        if message.get("kind") != "error" or not self.left_out:
            return message
        text = f"{message.get('message', '')} {message.get('traceback', '')}"
        notes = [f"{path}: {why}" for path, why in self.left_out.items() if os.path.basename(path) in text]
        if not notes:
            return message
        return dict(message, message=f"{message.get('message', '')} [gatekeeper did not copy {'; '.join(notes)}]")

    def release(self) -> None:
        shutil.rmtree(self.slot, ignore_errors=True)
        if self._lock is not None:
            # Unlinked while still held, so a corpus leaves no lock file per submission behind;
            # _take_slot checks that the file it locked is still the one at that path.
            with contextlib.suppress(OSError):
                os.unlink(self.slot + ".lock")
            self._lock.close()  # drops the flock
            self._lock = None


def make_copy(submission: str) -> PrivateCopy:
    """Copy the bundle of `submission` (an existing file) into a free slot, held until release()."""
    from gatekeeper.sandbox.isolation import bundle_sources

    main = os.path.realpath(submission)
    original = os.path.dirname(main)
    base = bundles_root()
    stem = hashlib.sha256(main.encode("utf-8", "surrogateescape")).hexdigest()[:16]
    try:
        base.mkdir(parents=True, exist_ok=True)
        slot, lock = _take_slot(base, stem)
    except OSError as exc:
        raise CopyFailed(f"gatekeeper could not make the private copy of the submission's files under {base}: "
                         f"{exc}; make GATEKEEPER_CACHE_DIR a writable folder with free space") from exc
    try:
        shutil.rmtree(slot, ignore_errors=True)  # what an earlier job of this slot left
        folder = os.path.join(slot, os.path.basename(original) or "root")
        os.makedirs(folder, mode=0o700)
        copy = PrivateCopy(original, folder, slot, os.path.join(folder, os.path.basename(main)), _lock=lock)
        total = 0
        for index, path in enumerate(bundle_sources(main)):
            why, size = _refusal(path, original, total, required=index == 0)
            if why:
                copy.left_out[path] = why
                continue
            rel = os.path.relpath(path, original)
            _copy_file(os.path.realpath(path), os.path.join(folder, rel))
            copy.copied.append(path)
            total += size
        return copy
    except BaseException as exc:
        shutil.rmtree(slot, ignore_errors=True)
        lock.close()
        if isinstance(exc, OSError) and not isinstance(exc, CopyFailed):
            raise CopyFailed(f"gatekeeper could not copy the submission's files into {slot}: {exc}; make "
                             "GATEKEEPER_CACHE_DIR a writable folder with free space") from exc
        raise


def _take_slot(base: Path, stem: str) -> tuple[str, IO[str]]:
    number = 0
    while True:
        path = base / f"{stem}-{number}.lock"
        handle = open(path, "a+")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            number += 1
            continue
        try:
            current = os.stat(path).st_ino
        except FileNotFoundError:
            current = None
        if current != os.fstat(handle.fileno()).st_ino:  # released and unlinked meanwhile: again
            handle.close()
            continue
        return str(base / f"{stem}-{number}"), handle


def _inside(path: str, folder: str) -> bool:
    return path.startswith(folder.rstrip("/") + "/")


def _refusal(path: str, original: str, total: int, required: bool) -> tuple[Optional[str], int]:
    """(why `path` is not copied, or None; its size). The submission itself is always copied:
    the static stage has read it whole already."""
    listed, real = os.path.abspath(path), os.path.realpath(path)
    if not _inside(listed, original) or not _inside(real, original):
        return ("it is a link to a file outside the submission's folder, and the sandbox follows no link out of "
                "the folder; put the file itself beside the submission"), 0
    try:
        size = os.stat(real).st_size
    except OSError as exc:
        return f"it could not be read ({exc.strerror})", 0
    if required:
        return None, size
    if size > FILE_BYTES:
        return (f"it is {_amount(size)}, over the {_amount(FILE_BYTES)} limit for one file beside the submission; "
                "keep large files out of the submission's folder"), size
    if total + size > TOTAL_BYTES:
        return (f"the submission's files beside it exceed {_amount(TOTAL_BYTES)} in all; keep large files out of "
                "the submission's folder"), size
    return None, size


def _amount(size: int) -> str:
    return f"{size / 1024 ** 2:.1f} MiB" if size >= 1024 ** 2 else f"{size} bytes"


def _copy_file(source: str, target: str) -> None:
    os.makedirs(os.path.dirname(target), exist_ok=True)
    shutil.copyfile(source, target, follow_symlinks=False)
    stat = os.stat(source)
    os.chmod(target, (stat.st_mode & 0o755) | 0o600)  # the job's own copy: writable by it
    os.utime(target, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # ninja compares modification times
