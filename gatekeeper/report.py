"""The report: the one schema everything the gatekeeper says is rendered from.

Schema version 2. Adding optional fields keeps the version; renaming, removing or
changing the meaning of a field bumps it. Version 2 (2026-12-05): a static finding that is
not `certain` no longer rejects on its own outside `strict`; it carries a `probe` link (the
run-time check that settles it and its outcome), and `severity` is the settled one. Every
finding has an `id` that probe links refer to. docs/report-schema.md lists the changes.
"""

from __future__ import annotations

from enum import Enum
from typing import Any, Optional

from pydantic import BaseModel, ConfigDict, Field

SCHEMA_VERSION = 2


class Verdict(str, Enum):
    PASS = "pass"
    REJECT = "reject"
    ERROR = "error"


class Severity(str, Enum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


class StageName(str, Enum):
    STATIC = "static"
    BUILD = "build"
    BEHAVIOUR = "behaviour"
    TIMING = "timing"
    SCORE = "score"


class StageStatus(str, Enum):
    PASSED = "passed"
    FAILED = "failed"  # error-severity findings
    ERROR = "error"  # the gatekeeper or the problem broke, not the submission
    SKIPPED = "skipped"  # not run: says why in `reason`
    NOT_IMPLEMENTED = "not-implemented"


class Category(str, Enum):
    """Closed set; ingestion pipelines filter on it. Part of the contract."""

    CACHED_OUTPUT = "cached-output"
    HARDCODED_SHAPE = "hardcoded-shape"
    TORCH_FALLBACK = "torch-fallback"
    REFERENCE_REUSE = "reference-reuse"
    HARNESS_TAMPERING = "harness-tampering"
    INTROSPECTION = "introspection"
    STREAM_ESCAPE = "stream-escape"
    THREAD_INJECTION = "thread-injection"
    LAZY_OUTPUT = "lazy-output"
    DYNAMIC_CODE = "dynamic-code"
    PRECISION_DOWNGRADE = "precision-downgrade"
    INPUT_MUTATION = "input-mutation"
    OUTPUT_ALIAS = "output-alias"
    UNINITIALIZED_OUTPUT = "uninitialized-output"
    SANDBOX_ESCAPE = "sandbox-escape"
    INCORRECT = "incorrect"
    BUILD_FAILURE = "build-failure"
    RUNTIME_FAILURE = "runtime-failure"
    TIMEOUT = "timeout"
    TIMING_IMPLAUSIBLE = "timing-implausible"
    # Not a hack: a notice that some checks did not run (GK006 no problem given). Added in
    # issue 21; GK006 was filed under hardcoded-shape, which counted it among the hacks.
    NOT_CHECKED = "not-checked"


class Confidence(str, Enum):
    """How sure a finding is. `certain`: a hack in every honest reading. `likely`: a hack
    in the usual reading, with rare honest uses. `suspect`: a pattern that honest code also
    writes; under the default profile it rejects only when a run-time check confirms it."""

    CERTAIN = "certain"
    LIKELY = "likely"
    SUSPECT = "suspect"


class ProbeOutcome(str, Enum):
    """What the run-time check named by a static finding made of it."""

    UNCONFIRMED = "unconfirmed"  # the check did not run (static-only, no problem, stage skipped)
    CONFIRMED = "confirmed"  # the check ran and saw the behaviour: the finding stands
    CLEARED = "cleared"  # the check ran and did not see it: the suspicion is dropped to a note


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", use_enum_values=False)


class Location(_Model):
    path: str
    line: int = Field(ge=1, description="1-based line")
    column: int = Field(ge=1, description="1-based column")
    end_line: Optional[int] = None
    end_column: Optional[int] = None


class Finding(_Model):
    rule: str = Field(description="rule code, e.g. GK101")
    name: str = Field(description="the bad pattern, e.g. ReturnsCachedOutput")
    category: Category
    severity: Severity
    stage: StageName
    message: str = Field(description="what was found and why it games the benchmark")
    hint: str = Field(description="what to write instead")
    location: Optional[Location] = None
    evidence: dict[str, Any] = Field(default_factory=dict)
    confidence: Confidence = Field(default=Confidence.CERTAIN, description="certain | likely | suspect")
    confirmed_by: Optional[str] = Field(
        default=None, description="the run-time check that confirms or clears a static suspicion, e.g. GK610"
    )
    probe: Optional[ProbeLink] = Field(
        default=None, description="static findings with a run-time check: what that check made of it")
    id: Optional[str] = Field(default=None, description="f1, f2, ... in report order; probe links refer to it")


class ProbeLink(_Model):
    """The evidence link of a static finding: finding -> run-time probe -> outcome."""

    check: Optional[str] = Field(description="the run-time check that settles it, e.g. GK610; None when none can")
    outcome: ProbeOutcome
    detail: str = Field(description="what the probe saw, or why it did not run")
    findings: list[str] = Field(default_factory=list,
                                description="ids of the run-time findings that confirm it")
    static_severity: Optional[Severity] = Field(
        default=None, description="the severity the rule gave before the probe settled it")


class FileRef(_Model):
    path: str
    sha256: str


class ProblemRef(FileRef):
    name: str


class StageResult(_Model):
    name: StageName
    status: StageStatus
    duration_s: float = 0.0
    reason: Optional[str] = Field(default=None, description="why skipped or errored")


class Environment(_Model):
    gatekeeper: str
    python: str
    torch: Optional[str] = None
    device: str = "cpu"
    gpu: Optional[str] = None
    isolation: Optional[str] = None
    isolation_reason: Optional[str] = Field(
        default=None, description="why the isolation is weaker than bubblewrap (and how to fix it); none under bubblewrap")


class Report(_Model):
    schema_version: int = SCHEMA_VERSION
    verdict: Verdict
    submission: FileRef
    problem: Optional[ProblemRef] = None
    profile: str
    stages: list[StageResult] = Field(default_factory=list)
    findings: list[Finding] = Field(default_factory=list)
    timing: Optional[dict[str, Any]] = None
    score: Optional[dict[str, Any]] = None
    work: Optional[dict[str, Any]] = Field(
        default=None, description="who did the work at run time: per class (own, torch, vendor, glue) the count "
        "and share of time, the top operators/kernels, and the error-budget ratios (behaviour stage)")
    environment: Environment
    bundle: list[FileRef] = Field(
        default_factory=list, description="the submission's own modules beside it (imported by it), checked with it")
    seed: Optional[int] = None
    error: Optional[str] = Field(
        default=None, description="set when verdict is error: what broke, for the operator"
    )

    @property
    def exit_code(self) -> int:
        return {Verdict.PASS: 0, Verdict.REJECT: 1, Verdict.ERROR: 3}[self.verdict]

    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == Severity.ERROR]

    def unconfirmed(self) -> list[Finding]:
        """Suspicions held back from rejecting until a run-time check settles them."""
        return [f for f in self.findings if f.probe is not None and f.probe.outcome == ProbeOutcome.UNCONFIRMED
                and f.probe.static_severity == Severity.ERROR and f.severity != Severity.ERROR]


def report_json_schema() -> dict[str, Any]:
    return Report.model_json_schema()
