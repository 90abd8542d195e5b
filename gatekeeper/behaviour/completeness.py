"""Did the submission's worker run everything it was sent? (issue 22 item 1)

A behaviour stage that observed fewer calls than it planned is never a pass. Which way it
fails depends on who broke the run:
  - the submission: its worker crashed, hung, went over memory, raised, forged a frame.
    Those already carry an error finding (runtime.failures), and that finding is the verdict.
  - the gatekeeper: a message to the worker failed to arrive intact (a failed write, a short
    read, a missing acknowledgement) or the worker ended normally without making every call.
    Nothing the submission did explains it, so the stage is an ERROR (exit 3) that says what
    broke, never a reject of honest code and never a pass of untested code.
"""

from __future__ import annotations

from typing import Any, Optional

from gatekeeper.report import Finding, Severity
from gatekeeper.sandbox import JobResult


def planned_trials(references: dict[str, dict[str, Any]]) -> set[str]:
    """The labels of the named calls the worker makes (subject_job.Subject.run)."""
    planned = set(references)
    if "nominal-second" in planned:
        planned.add("repeat")  # the nominal inputs again: determinism
    else:
        planned.discard("nominal-overwrite")  # made only after the second call
    return planned


def observed_trials(result: JobResult) -> set[str]:
    return {str(m.get("trial")) for m in result.messages if m.get("kind") in ("call", "call-error")}


def observed_schedule(result: JobResult) -> set[int]:
    return {int(m["index"]) for m in result.messages
            if m.get("kind") in ("schedule-call", "schedule-error") and isinstance(m.get("index"), int)}


def shortfall(result: JobResult, references: dict[str, dict[str, Any]],
              scheduled: dict[str, Any]) -> Optional[str]:
    """What was planned and not observed, in words (None: every planned call was observed)."""
    missing_trials = sorted(planned_trials(references) - observed_trials(result))
    sent = {int(c["index"]) for c in scheduled.get("calls", [])}
    missing_calls = sorted(sent - observed_schedule(result)) if "nominal" in references else []
    parts = []
    if missing_trials:
        parts.append(f"{len(missing_trials)} of {len(planned_trials(references))} named trial calls "
                     f"({', '.join(missing_trials[:6])})")
    if missing_calls:
        parts.append(f"{len(missing_calls)} of {len(sent)} scheduled calls (first: {missing_calls[0]})")
    return " and ".join(parts) or None


def infrastructure_failure(result: JobResult, references: dict[str, dict[str, Any]],
                           scheduled: dict[str, Any], found: list[Finding]) -> Optional[str]:
    """The reason for an ERROR outcome, or None. A run with an error finding of the
    submission's own (a crash, a raise, a timeout) is judged on that finding instead."""
    if any(f.severity == Severity.ERROR for f in found):
        return None
    broken = result.feed_problem()
    for message in result.of_kind("feed-broken"):
        broken = broken or str(message.get("detail"))
    missing = shortfall(result, references, scheduled)
    if broken is None and missing is None:
        return None
    what = []
    if broken:
        what.append(f"the inputs did not reach the submission's worker intact: {broken}")
    if missing:
        what.append(f"the submission's worker did not run {missing}, and nothing it did explains that")
    return ("infrastructure error: " + "; ".join(what) + ". The run is incomplete, so it can neither pass "
            "nor reject; this is a gatekeeper fault, not the submission's: run it again, and report it if it "
            f"repeats (worker status '{result.status}', phase '{result.phase}')")
