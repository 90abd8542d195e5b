"""`gatekeeper explain` for the run-time codes (GK6xx behaviour and build, GK7xx timing):
what each check observes, why it matters, a flagged and a clean example.

Kept in the package (not read from docs/ at run time) so that an installed wheel explains
every code. The fix is the check's own hint. The texts live in three modules by family;
tests/test_explain_every_code.py checks that every run-time code of the catalogue has one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class CheckDoc:
    what: str  # what the check observes, in one or two sentences
    why: str  # why it games the benchmark (or why the result cannot be trusted)
    flagged: str  # a submission (or problem) the check flags
    clean: str  # its honest near miss, not flagged


def doc_for(code: str) -> Optional[CheckDoc]:
    from gatekeeper.runtime.check_docs_output import OUTPUT_DOCS
    from gatekeeper.runtime.check_docs_process import PROCESS_DOCS
    from gatekeeper.runtime.check_docs_timing import TIMING_DOCS

    return OUTPUT_DOCS.get(code) or PROCESS_DOCS.get(code) or TIMING_DOCS.get(code)


def forward(body: str, init: str = "") -> str:
    """A ModelNew whose forward is `body` (dedented, 8 spaces added), for the examples."""
    lines = ["class ModelNew(torch.nn.Module):"]
    if init:
        lines += ["    def __init__(self):", "        super().__init__()"] + ["        " + l for l in init.splitlines()]
    lines.append("    def forward(self, x):")
    lines += ["        " + l if l else "" for l in body.strip("\n").splitlines()]
    return "\n".join(lines)
