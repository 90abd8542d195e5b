"""Run-time evidence beyond correctness, judged in the parent after the Judge: who did the
work (GK667, the report's `work`) and the error budget (GK668). Static suspicions are
settled from these afterwards, by gatekeeper.settle."""

from __future__ import annotations

from typing import Any, Optional

from gatekeeper.behaviour.compare import error_ratio
from gatekeeper.runtime.checks import finding
from gatekeeper.behaviour.work import judge as judge_work
from gatekeeper.report import Finding, Location, Severity, StageName

STAGE = StageName.BEHAVIOUR
DEFAULT_MAX_ERROR_RATIO = 100.0


def rule_options(config: Any, code: str) -> dict[str, Any]:
    try:
        return dict(config.rule(code).options)
    except Exception:
        return {}


def rule_enabled(config: Any, code: str) -> bool:
    try:
        return bool(config.rule(code).enabled)
    except Exception:
        return True


def runtime_evidence(messages: list[dict[str, Any]], references: dict[str, dict[str, Any]], judge: Any,
                     config: Any, location: Optional[Location],
                     static: list[Finding], source: str = "",
                     forbidden: tuple[str, ...] = ()) -> tuple[Optional[dict[str, Any]], list[Finding]]:
    """(the report's `work` section or None, findings). `static` is not changed here:
    gatekeeper.settle links the static suspicions to this evidence after the stages ran."""
    found: list[Finding] = []
    work: Optional[dict[str, Any]] = None
    calls = {m["trial"]: m["work"] for m in messages if m.get("kind") == "call" and isinstance(m.get("work"), dict)}
    if calls and rule_enabled(config, "GK667"):
        reference_ops = sorted({op for r in references.values() for op in r.get("compute_ops", [])})
        work, more = judge_work(calls, reference_ops, config.profile, rule_options(config, "GK667"), location,
                                 source, forbidden)
        found += more
    if rule_enabled(config, "GK667"):  # the code that executed, sampled (CPU runs): behaviour.executing
        from gatekeeper.behaviour.executing import judge as judge_executing

        section, more = judge_executing(messages, rule_options(config, "GK667"), location)
        if section is not None:
            work = dict(work or {})
            work["executing"] = section
            if any(f.rule == "GK667" for f in more):
                work["torch_did_the_work"] = True
            found += [f for f in more if not (f.rule == "GK667" and any(g.rule == "GK667" for g in found))]
    if rule_enabled(config, "GK668"):
        measured, more = _error_budget(references, judge, config)
        found += more
        if measured:
            work = dict(work or {})
            work["error_ratio"] = {t: round(r["ratio"], 2) for t, r in measured.items()}
    return work, found


def _error_budget(references: dict[str, dict[str, Any]], judge: Any,
                  config: Any) -> tuple[dict[str, dict[str, Any]], list[Finding]]:
    limit = float(rule_options(config, "GK668").get("max_error_ratio", DEFAULT_MAX_ERROR_RATIO))
    measured: dict[str, dict[str, Any]] = {}
    for trial, reference in references.items():
        if "output64" not in reference or not judge.correct.get(trial) or trial not in judge.outputs:
            continue
        result = error_ratio(reference["output"], reference["output64"], judge.outputs[trial])
        if result is not None:
            measured[trial] = result
    over = {t: r for t, r in measured.items() if r["ratio"] > limit}
    if not measured:
        return measured, _not_judged(references, judge)
    if not over:
        return measured, []
    trial, worst = max(over.items(), key=lambda kv: kv[1]["ratio"])
    f = finding("GK668", STAGE, {"ratios": {t: round(r["ratio"], 1) for t, r in measured.items()},
                                 "max_error_ratio": limit, **worst, "trials": sorted(over)}, judge.location,
                trial=trial, ratio=worst["ratio"], dtype=worst["dtype"], error=worst["error"], honest=worst["honest"])
    if config.profile == "lenient":
        f.severity = Severity.WARNING
    return measured, [f]


def _not_judged(references: dict[str, dict[str, Any]], judge: Any) -> list[Finding]:
    """GK669, a note, when no named trial had a float64 reference for a reason the reference
    worker gave (too large, no float64 path): never a silent pass on precision. Nothing when the
    output is not floating (no budget applies) or the submission was wrong anyway."""
    skipped = [r["wide_skipped"] for r in references.values() if isinstance(r.get("wide_skipped"), str)]
    if not skipped or not any(judge.correct.get(t) for t in references):
        return []
    return [finding("GK669", STAGE, {"reason": skipped[0]}, judge.location, why=skipped[0])]
