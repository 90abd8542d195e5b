"""A worker's stdout or stderr, read through a pipe by a thread that keeps only the tail:
a submission that prints gigabytes costs the parent a little CPU, never disk or memory."""

from __future__ import annotations

import os
import threading
from typing import IO

KEEP_BYTES = 16 * 1024


class Drain:
    def __init__(self, stream: IO[bytes], keep: int = KEEP_BYTES) -> None:
        self._fd = stream.fileno()
        self._stream = stream
        self._keep = keep
        self._tail = bytearray()
        self.total = 0
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            try:
                chunk = os.read(self._fd, 1 << 16)
            except OSError:
                return
            if not chunk:
                return
            self.total += len(chunk)
            self._tail += chunk
            if len(self._tail) > 2 * self._keep:
                del self._tail[: len(self._tail) - self._keep]

    def finish(self, timeout_s: float = 2.0) -> None:
        """Wait (bounded: a leftover process may hold the pipe) for the end of the output."""
        self._thread.join(timeout_s)

    def dropped(self) -> int:
        return max(0, self.total - min(len(self._tail), self._keep))

    def tail(self, size: int) -> str:
        data = bytes(self._tail[-size:])
        return data.decode("utf-8", errors="replace")

    def close(self) -> None:
        try:
            self._stream.close()
        except OSError:
            pass
