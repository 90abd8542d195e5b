"""The parts the explain texts of the run-time codes are made of (gatekeeper.runtime.check_docs)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CheckDoc:
    what: str  # what the check observes, in one or two sentences
    why: str  # why it games the benchmark (or why the result cannot be trusted)
    flagged: str  # a submission (or problem) the check flags
    clean: str  # its honest near miss, not flagged


def forward(body: str, init: str = "") -> str:
    """A ModelNew whose forward is `body` (dedented, 8 spaces added), for the examples."""
    lines = ["class ModelNew(torch.nn.Module):"]
    if init:
        lines += ["    def __init__(self):", "        super().__init__()"] + ["        " + l for l in init.splitlines()]
    lines.append("    def forward(self, x):")
    lines += ["        " + l if l else "" for l in body.strip("\n").splitlines()]
    return "\n".join(lines)
