"""Large tensors between workers and the parent, outside the framed pipe.

A tensor of at least `threshold()` bytes (GATEKEEPER_SPILL_BYTES, default 64 MiB) does not
travel inside a frame: the sender streams its bytes into a file of the receiving side's
transfer folder and the frame carries a descriptor `{"name", "bytes", "sha256"}`. The frame
is HMAC-signed like every other, so the digest is authenticated; the receiver checks the
size and the digest before it uses a single byte, and a missing, truncated, linked or
altered file is a `SpillError` (the runner turns it into status "forged": never a pass).

Where the files live: `<the job's private working dir>/xfer` (runner.Job), bound read-write
into the worker under bubblewrap and visible to nobody else there. Under `unshare` and `none`
the file system is shared (docs/threat-model.md): a concurrently running submission could
read the reference's files while they exist. The parent adopts every file as soon as the
worker is gone: it moves it out of the worker's folder into a folder of its own (`held`,
0700, in the run's temp root), checks that no other link to it is left, checks it and keeps
its descriptor. A file fed on to the next worker (an input the reference worker made) is
moved again, into that worker's folder, instead of being copied: one file less written per
large input, which on a disk behind a slow writeback is most of a large call's time. A file
the parent has mapped (and so could still read) is copied, never moved; a move that the file
system refuses (another mount) falls back to the copy.

Memory: the sender writes in chunks (a GPU tensor goes through a bounded host buffer), the
worker-side receiver reads straight into the destination tensor, and the parent maps the
file (copy-on-write) instead of reading it: no second full host copy anywhere.
"""

from __future__ import annotations

import ctypes
import hashlib
import mmap
import os
import re
import uuid
from typing import Any, Optional

from gatekeeper.sandbox.held_files import same_file, take_name

DIR_ENV = "GATEKEEPER_SPILL_DIR"
BYTES_ENV = "GATEKEEPER_SPILL_BYTES"
DEFAULT_THRESHOLD = 64 << 20
CHUNK = 64 << 20  # bytes per streamed piece (host buffer of a GPU tensor, hash and write unit)
# The parent's read buffer for checking a file's digest: small enough for glibc to hand the
# same heap block back on the next adoption (a 64 MiB one was mapped and faulted in afresh
# for every file).
READ_CHUNK = 4 << 20
_NAME = re.compile(r"^[0-9a-f]{32}\.bin$")


class SpillError(Exception):
    """A transfer file is missing, truncated, linked elsewhere, or does not match its digest."""


def threshold(environ: Optional[dict[str, str]] = None) -> int:
    """Tensors of at least this many bytes travel as files (read in the parent, passed to workers)."""
    raw = (environ if environ is not None else os.environ).get(BYTES_ENV, "")
    try:
        value = int(raw)
    except ValueError:
        return DEFAULT_THRESHOLD
    return value if value > 0 else DEFAULT_THRESHOLD


def worker_dir() -> Optional[str]:
    """The transfer folder inside a worker (None: no spilling, everything inline)."""
    folder = os.environ.get(DIR_ENV)
    return folder if folder and os.path.isdir(folder) else None


def should_spill(nbytes: int) -> bool:
    return worker_dir() is not None and nbytes >= threshold()


def _host_view(tensor: Any) -> memoryview:
    """The bytes of a contiguous CPU tensor, without a copy (the tensor must stay alive)."""
    size = tensor.numel() * tensor.element_size()
    return memoryview((ctypes.c_ubyte * size).from_address(tensor.data_ptr())).cast("B")


def _byte_chunks(tensor: Any):
    """Row-major bytes of any tensor in pieces of at most CHUNK bytes (bounded host memory)."""
    import torch

    flat = tensor.detach().contiguous().reshape(-1)
    if flat.numel() == 0:
        return
    raw = flat.view(torch.uint8) if flat.element_size() > 0 else flat
    if raw.device.type == "cpu":
        view = _host_view(raw)
        for start in range(0, len(view), CHUNK):
            yield view[start:start + CHUNK]
        return
    buffer = torch.empty(min(CHUNK, raw.numel()), dtype=torch.uint8)
    host = _host_view(buffer)
    for start in range(0, raw.numel(), CHUNK):
        piece = raw[start:start + CHUNK]
        buffer[: piece.numel()].copy_(piece)
        yield host[: piece.numel()]


def tensor_digest(tensor: Any) -> str:
    """sha256 of the tensor's row-major bytes, streamed (the digest a spilled file carries)."""
    h = hashlib.sha256()
    for piece in _byte_chunks(tensor):
        h.update(piece)
    return h.hexdigest()


def write(tensor: Any, folder: Optional[str] = None) -> dict[str, Any]:
    """Worker side: stream the tensor into a new file of the transfer folder; its descriptor."""
    folder = folder or worker_dir()
    if folder is None:
        raise SpillError("no transfer folder in this process")
    name = uuid.uuid4().hex + ".bin"
    h, size = hashlib.sha256(), 0
    fd = os.open(os.path.join(folder, name), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        for piece in _byte_chunks(tensor):
            h.update(piece)
            size += len(piece)
            while piece:
                piece = piece[os.write(fd, piece):]
    finally:
        os.close(fd)
    return {"name": name, "bytes": size, "sha256": h.hexdigest()}


def _open_checked(name: Any, folder: str, dir_fd: Optional[int] = None) -> int:
    if not isinstance(name, str) or not _NAME.match(name):
        raise SpillError(f"transfer file name {str(name)[:80]!r} is not one the sandbox writes")
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK  # a FIFO in its place must not block the open
    try:
        if dir_fd is not None:
            return os.open(name, flags, dir_fd=dir_fd)
        return os.open(os.path.join(folder, name), flags)
    except OSError as exc:
        raise SpillError(f"transfer file {name} is missing or not a plain file ({exc.strerror})") from None


def _check_size(fd: int, name: str, want: Any) -> int:
    info = os.fstat(fd)
    import stat

    if not stat.S_ISREG(info.st_mode):
        raise SpillError(f"transfer file {name} is not a plain file")
    if not isinstance(want, int) or info.st_size != want:
        raise SpillError(f"transfer file {name} holds {info.st_size} bytes, its signed descriptor says {want}")
    return info.st_size


def read_into(descriptor: dict[str, Any], tensor: Any, folder: Optional[str] = None) -> Any:
    """Worker side: fill `tensor` (any device, contiguous) from a transfer file, checking
    size and digest on the way (one pass; a GPU tensor through a bounded host buffer)."""
    import torch

    folder = folder or worker_dir() or ""
    name = descriptor.get("name")
    fd = _open_checked(name, folder)
    try:
        size = _check_size(fd, str(name), descriptor.get("bytes"))
        if size != tensor.numel() * tensor.element_size():
            raise SpillError(f"transfer file {name}: {size} bytes for a tensor of "
                             f"{tensor.numel() * tensor.element_size()}")
        raw = tensor.view(-1).view(torch.uint8)
        h = hashlib.sha256()
        on_host = raw.device.type == "cpu"
        buffer = raw if on_host else torch.empty(min(CHUNK, max(size, 1)), dtype=torch.uint8)
        host = _host_view(buffer) if size else memoryview(b"")
        for start in range(0, size, CHUNK):
            count = min(CHUNK, size - start)
            window = host[start:start + count] if on_host else host[:count]
            got = 0
            while got < count:
                n = os.readv(fd, [window[got:]])
                if n <= 0:
                    raise SpillError(f"transfer file {name} ended early")
                got += n
            h.update(window)
            if not on_host:
                raw[start:start + count].copy_(buffer[:count])
        if h.hexdigest() != descriptor.get("sha256"):
            raise SpillError(f"transfer file {name} does not match the digest in its signed descriptor")
    finally:
        os.close(fd)
    return tensor


def discard(descriptor: dict[str, Any]) -> None:
    """Worker side: remove a transfer file this worker will not read again."""
    name, folder = descriptor.get("name"), worker_dir()
    if folder and isinstance(name, str) and _NAME.match(name):
        try:
            os.unlink(os.path.join(folder, name))
        except OSError:
            pass


class FileData:
    """Parent side: an adopted transfer file (its one name in the held folder, or unlinked;
    verified), mapped on demand."""

    def __init__(self, fd: int, nbytes: int, sha256: str, held: Optional[str] = None) -> None:
        self.fd, self.nbytes, self.sha256 = fd, nbytes, sha256
        self.held = held  # its only name, in the parent's own folder (None: unlinked)
        self._map: Optional[mmap.mmap] = None

    def buffer(self) -> mmap.mmap:
        """A copy-on-write mapping of the whole file (pages load as they are read)."""
        if self._map is None:
            self._map = mmap.mmap(self.fd, self.nbytes, access=mmap.ACCESS_COPY)
        return self._map

    def tensor(self, dtype: Any, start: int = 0, count: int = -1) -> Any:
        """Elements [start, start + count) as a flat tensor over the mapping (no copy)."""
        import torch

        size = torch.empty((), dtype=dtype).element_size()
        total = self.nbytes // size
        count = total - start if count < 0 else count
        if count <= 0:
            return torch.empty(0, dtype=dtype)
        return torch.frombuffer(self.buffer(), dtype=dtype, count=count, offset=start * size)

    def copy_to(self, folder: str, dir_fd: Optional[int] = None) -> dict[str, Any]:
        """A fresh file with these bytes in another worker's transfer folder (kernel-side copy)."""
        if self.fd < 0:
            raise SpillError("this transfer file was already handed to a worker and released")
        name = uuid.uuid4().hex + ".bin"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
        out = os.open(name, flags, 0o600, dir_fd=dir_fd) if dir_fd is not None \
            else os.open(os.path.join(folder, name), flags, 0o600)
        try:
            offset = 0
            while offset < self.nbytes:
                try:
                    n = os.copy_file_range(self.fd, out, self.nbytes - offset, offset)
                except OSError:
                    n = os.sendfile(out, self.fd, offset, min(CHUNK, self.nbytes - offset))
                if n <= 0:
                    raise SpillError("copying a transfer file stopped early")
                offset += n
        finally:
            os.close(out)
        return {"name": name, "bytes": self.nbytes, "sha256": self.sha256}

    def move_to(self, folder: str, dir_fd: Optional[int] = None) -> dict[str, Any]:
        """Hand this file itself to another worker's transfer folder (a rename, no bytes
        written) and release it; a copy (copy_to) where it cannot be moved: the parent mapped
        it, it has no name left, or the rename fails (another file system)."""
        if self.fd < 0:
            raise SpillError("this transfer file was already handed to a worker and released")
        if self.held is None or self._map is not None:
            return self.copy_to(folder, dir_fd)
        name = uuid.uuid4().hex + ".bin"
        try:
            if dir_fd is not None:
                os.rename(self.held, name, dst_dir_fd=dir_fd)
                moved = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            else:
                os.rename(self.held, os.path.join(folder, name))
                moved = os.stat(os.path.join(folder, name), follow_symlinks=False)
        except OSError:
            return self.copy_to(folder, dir_fd)
        self.held = None  # its name is the worker's now, whatever follows
        intact = same_file(moved, self.fd) and moved.st_nlink == 1
        self.close()
        if not intact:
            raise SpillError(f"transfer file {name} was replaced while it was handed on")
        return {"name": name, "bytes": self.nbytes, "sha256": self.sha256}

    def close(self) -> None:
        if self.held is not None:
            try:
                os.unlink(self.held)
            except OSError:
                pass
            self.held = None
        if self._map is not None:
            try:
                self._map.close()
            except BufferError:  # a tensor still views it: the mapping goes with that tensor
                pass
            self._map = None
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def __len__(self) -> int:
        return self.nbytes


def adopt(descriptor: Any, folder: str, dir_fd: Optional[int] = None) -> FileData:
    """Parent side, after the worker is gone: open the file, take it out of the worker's
    folder (nobody else can find it any more), refuse one with other links, and check size
    and digest."""
    if not isinstance(descriptor, dict):
        raise SpillError("a transfer descriptor is not an object")
    name = descriptor.get("name")
    fd = _open_checked(name, folder, dir_fd)
    held: Optional[str] = None
    try:
        size = _check_size(fd, str(name), descriptor.get("bytes"))
        held = take_name(fd, str(name), folder, dir_fd)
        if os.fstat(fd).st_nlink != (0 if held is None else 1):
            raise SpillError(f"transfer file {name} has another link: it may be another file's data")
        h = hashlib.sha256()
        buffer = bytearray(min(READ_CHUNK, max(size, 1)))
        view = memoryview(buffer)
        offset = 0
        while offset < size:
            n = os.preadv(fd, [view[: min(READ_CHUNK, size - offset)]], offset)
            if n <= 0:
                raise SpillError(f"transfer file {name} ended early")
            h.update(view[:n])
            offset += n
        if h.hexdigest() != descriptor.get("sha256"):
            raise SpillError(f"transfer file {name} does not match the digest in its signed descriptor")
    except BaseException:
        os.close(fd)
        if held is not None:
            os.unlink(held)
        raise
    return FileData(fd, size, h.hexdigest(), held)


def adopt_tree(value: Any, folder: str, dir_fd: Optional[int] = None) -> Any:
    """Every spilled tensor inside a received message gets its verified `FileData` as `data`."""
    if isinstance(value, dict):
        if value.get("__tensor__") is True and "file" in value:
            out = {k: v for k, v in value.items() if k != "file"}
            out["data"] = adopt(value["file"], folder, dir_fd)
            return out
        return {k: adopt_tree(v, folder, dir_fd) for k, v in value.items()}
    if isinstance(value, list):
        return [adopt_tree(v, folder, dir_fd) for v in value]
    return value


def export_tree(value: Any, folder: str, release: bool = True, dir_fd: Optional[int] = None) -> Any:
    """Before a message goes to a worker: each adopted tensor becomes a file in its folder.
    With `release` (the default) the file itself is handed on (FileData.move_to) and the
    parent's hold on it closed, so a fed input occupies the disk once, not twice, and is not
    written again (the parent never reads inputs after feeding them)."""
    copied: dict[int, dict[str, Any]] = {}
    out = _export(value, folder, copied, dir_fd, release)
    if release:
        for data in list(_file_data(value)):
            data.close()
    return out


def _export(value: Any, folder: str, copied: dict[int, dict[str, Any]], dir_fd: Optional[int],
            release: bool) -> Any:
    if isinstance(value, dict):
        data = value.get("data")
        if value.get("__tensor__") is True and isinstance(data, FileData):
            if id(data) not in copied:  # released afterwards anyway: the file itself goes
                copied[id(data)] = data.move_to(folder, dir_fd) if release else data.copy_to(folder, dir_fd)
            out = {k: v for k, v in value.items() if k != "data"}
            out["file"] = dict(copied[id(data)])
            return out
        return {k: _export(v, folder, copied, dir_fd, release) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_export(v, folder, copied, dir_fd, release) for v in value]
    return value


def _file_data(value: Any):
    if isinstance(value, FileData):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _file_data(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _file_data(v)
