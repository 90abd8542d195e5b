"""What came back from one sandboxed worker (runner.Job.wait)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional


@dataclass
class JobResult:
    """What came back from one worker.

    status: "ok" (the done frame arrived), "timeout" (a phase ran past its limit), "memory"
    (resident memory over the cap), "crashed" (the process ended without a done frame),
    "forged" (a frame failed authentication).
    """

    status: str
    messages: list[dict[str, Any]] = field(default_factory=list)
    phase: str = "start"
    returncode: Optional[int] = None
    stderr_tail: str = ""
    stdout_tail: str = ""
    isolation: str = "none"
    elapsed_s: float = 0.0
    detail: str = ""
    output_dropped_bytes: int = 0
    # What the parent fed (Job.feed): the byte size of each message in order, how many were
    # fully written, and why a write failed (None: every write went through).
    fed_bytes: list[int] = field(default_factory=list)
    fed_written: int = 0
    feed_error: Optional[str] = None

    def feed_problem(self) -> Optional[str]:
        """Why the messages fed to this worker did not all arrive intact (None: they did).
        Each fed message is acknowledged by a signed 'fed-ack' frame carrying its sequence
        number and byte size (sandbox.worker.Channel.receive); a missing or mismatched one, a
        failed write or a short read means the worker ran on something other than was sent."""
        if self.feed_error:
            return self.feed_error
        if self.fed_written < len(self.fed_bytes):
            return (f"only {self.fed_written} of the {len(self.fed_bytes)} messages fed to the worker were "
                    f"written before it ended")
        for failed in self.of_kind("receive-failed"):
            return f"the worker read a short message from the parent: {failed.get('detail')}"
        acks = {m.get("seq"): m.get("bytes") for m in self.of_kind("fed-ack")}
        for seq, size in enumerate(self.fed_bytes):
            if seq not in acks:
                return f"message {seq} ({size} bytes) fed to the worker was never acknowledged as received"
            if acks[seq] != size:
                return f"message {seq} fed to the worker was {size} bytes, the worker received {acks[seq]}"
        return None

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [m for m in self.messages if m.get("kind") == kind]

    def first(self, kind: str) -> Optional[dict[str, Any]]:
        found = self.of_kind(kind)
        return found[0] if found else None
