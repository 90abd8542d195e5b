"""The stage contract: what a stage receives (Submission, RunOptions) and returns (StageOutcome).

Kept apart from pipeline.py so that the stages (build, behaviour, timing), which the pipeline
loads by name, do not import the pipeline back. pipeline.py re-exports these names.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Optional

from gatekeeper.report import Finding, StageName, StageStatus


@dataclass
class Submission:
    path: str
    data: bytes

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()


@dataclass
class RunOptions:
    last_stage: StageName = StageName.BEHAVIOUR
    keep_going: bool = False
    seed: Optional[int] = None
    time: bool = False
    # A static-only run checks, statically, that the problem defines Model, get_inputs and
    # get_init_inputs (exit 3 otherwise; it runs no code, not even the problem's);
    # check_static, the fast path for any problem file, turns it off.
    import_problem: bool = True


@dataclass
class StageOutcome:
    status: StageStatus
    findings: list[Finding] = field(default_factory=list)
    # Report fields this stage fills (timing, score) and environment details (isolation, gpu).
    report: dict[str, Any] = field(default_factory=dict)
    environment: dict[str, Any] = field(default_factory=dict)
    reason: Optional[str] = None
