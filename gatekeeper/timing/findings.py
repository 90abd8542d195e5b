"""The timing stage's findings (GK7NN). Not static rules: they are judged on measurements,
by the trusted parent, after the worker has reported its times."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from gatekeeper.report import Category, Finding, Severity, StageName


@dataclass(frozen=True)
class TimingRule:
    code: str
    name: str
    category: Category
    severity: Severity
    summary: str
    message: str
    hint: str

    def finding(self, detail: str = "", evidence: Optional[dict[str, Any]] = None, config: Any = None,
                ) -> Optional[Finding]:
        """A finding, or None when the configuration disables this rule."""
        severity = self.severity
        if config is not None:
            settings = config.rule(self.code)
            if not settings.enabled:
                return None
            severity = settings.severity or severity
        message = f"{self.message} {detail}".strip()
        return Finding(rule=self.code, name=self.name, category=self.category, severity=severity,
                       stage=StageName.TIMING, message=message, hint=self.hint, evidence=evidence or {})


BELOW_FLOOR = TimingRule(
    "GK701", "TimeBelowPhysicalFloor", Category.TIMING_IMPLAUSIBLE, Severity.ERROR,
    "measured time is below the problem's physical floor",
    "The submission's median time is below the least time this problem can take on this GPU "
    "(the bytes it must move over peak bandwidth, its operations over peak rate, or one empty "
    "kernel launch), so the work was not all done inside the timed call.",
    "Do all of the problem's work inside forward(), on the current CUDA stream, on every call; "
    "do not return early, skip work, reuse results, or leave work running after the call returns.",
)

EXTREME_SPEEDUP = TimingRule(
    "GK702", "ExtremeSpeedupNeedsReview", Category.TIMING_IMPLAUSIBLE, Severity.WARNING,
    "speedup over the reference is above the review threshold",
    "The speedup over the reference is above the configured review threshold. It may be real "
    "(a poor reference), but such results are usually skipped work or a measurement escape.",
    "If the speedup is real, say why in the submission (which work the reference wastes); a "
    "reviewer will confirm it before it is recorded.",
)

TIMED_OUTPUT_WRONG = TimingRule(
    "GK703", "TimedOutputDiffers", Category.INCORRECT, Severity.ERROR,
    "an output of a timed call does not match the reference",
    "An output produced during timing differs from the reference on the same inputs, although "
    "the behaviour stage passed: the submission computes correctly only when it is checked.",
    "Compute the same result on every call; do not detect the harness, the call count, CUDA "
    "graph capture or timing events to switch to a cheaper path.",
)

REFERENCE_SLOWED = TimingRule(
    "GK704", "ReferenceSlowedBySubmission", Category.TIMING_IMPLAUSIBLE, Severity.WARNING,
    "the reference ran slower beside the submission than alone",
    "The reference, timed in its own worker in blocks alternating with the submission's, took "
    "longer than when it was timed alone before the submission's worker started: something "
    "kept the device busy between the submission's calls, which inflates the speedup.",
    "Do not patch torch, change global settings (matmul precision, cuDNN flags, allocator "
    "settings) or keep the GPU busy outside your own forward() call.",
)

STREAM_ESCAPE = TimingRule(
    "GK705", "WorkEscapesTimedStream", Category.STREAM_ESCAPE, Severity.ERROR,
    "work keeps running on another stream after the call returns",
    "After the timed call's end event, the device still had work from the call on another "
    "stream or queue; the event-based time would not include it. The speedup here is computed "
    "from times that run to the device-wide synchronisation, which include that work.",
    "Launch every kernel on torch.cuda.current_stream() (at::cuda::getCurrentCUDAStream() in "
    "C++), or make the current stream wait on your side streams before forward() returns.",
)

GRAPH_CAPTURE_FAILED = TimingRule(
    "GK706", "NotGraphCapturable", Category.RUNTIME_FAILURE, Severity.WARNING,
    "CUDA-graph timing was asked for but the call cannot be captured",
    "Timing in CUDA-graph mode was requested, but capturing the call into a graph failed; the "
    "times were taken with plain launches instead and are labelled so.",
    "Avoid host synchronisation, CPU tensors and allocation outside the caching allocator "
    "inside forward() if the problem is to be timed as a graph.",
)

TIMING_RUN_FAILED = TimingRule(
    "GK707", "FailsUnderTiming", Category.RUNTIME_FAILURE, Severity.ERROR,
    "the submission crashed or raised while being timed",
    "The submission failed while being timed (many calls in a row, each on new inputs, L2 "
    "flushes between calls), although it passed the behaviour stage.",
    "Make forward() safe to call many times in a row on different inputs of the same shape; "
    "free or reuse scratch memory instead of growing it per call.",
)

TIMING_TIMEOUT = TimingRule(
    "GK708", "TimingRanOutOfTime", Category.TIMEOUT, Severity.ERROR,
    "the timing run did not finish within its limit",
    "Timing the submission did not finish within its wall-clock limit.",
    "Check for calls that block (host synchronisation in a loop, waiting on other threads) or "
    "that get slower with every call.",
)

RESULTS_FORGED = TimingRule(
    "GK709", "TimingResultsForged", Category.HARNESS_TAMPERING, Severity.ERROR,
    "the timing worker's results failed authentication",
    "A message from the worker that ran the submission failed authentication: something in "
    "that process wrote to the harness's result channel.",
    "Do not write to file descriptors, pipes or sockets you did not open; a submission only "
    "computes its outputs.",
)

RULES: tuple[TimingRule, ...] = (BELOW_FLOOR, EXTREME_SPEEDUP, TIMED_OUTPUT_WRONG, REFERENCE_SLOWED,
                                 STREAM_ESCAPE, GRAPH_CAPTURE_FAILED, TIMING_RUN_FAILED, TIMING_TIMEOUT,
                                 RESULTS_FORGED)
