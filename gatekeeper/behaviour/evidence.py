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
                if _seen_by_the_dispatcher(work):
                    # The dispatcher watched torch do most of the compute time in plain sight: the
                    # library samples are those ops, and its finding (a warning for torch next to
                    # an own kernel that writes the result, under `default`) is the verdict. The
                    # sampler decides below the dispatcher, where the recorder sees nothing.
                    section["explained_by_the_dispatcher"] = True
                    more = [f for f in more if f.rule != "GK667"]
                else:
                    work["torch_did_the_work"] = True
            elif not any(f.rule == "GK667" for f in found):
                more += _library_part(section, config.profile, location)
            found += [f for f in more if not (f.rule == "GK667" and any(g.rule == "GK667" for g in found))]
    if rule_enabled(config, "GK668"):
        measured, more = _error_budget(references, judge, config)
        found += more
        if measured:
            work = dict(work or {})
            work["error_ratio"] = {t: round(r["ratio"], 2) for t, r in measured.items()}
    return work, found


def _seen_by_the_dispatcher(work: dict[str, Any]) -> bool:
    """Whether the dispatcher recorder saw torch do most of the checked calls' compute time (an
    honest torch GEMM + own epilogue: own code 46% of the compute time there, 5-15% of the
    sampled compute, below the sampler's 5% on some runs)."""
    share = work.get("own_share_of_compute")
    torch_ops = ((work.get("classes") or {}).get("torch") or {}).get("count", 0)
    return isinstance(share, (int, float)) and share <= 0.5 and bool(torch_ops)


LIBRARY_PART = 0.25  # a library's share of the sampled compute that is said, though not a conviction


def _library_part(section: dict[str, Any], profile: str, location: Optional[Location]) -> list[Finding]:
    """Below the dispatcher, a library that did a real part of the compute (a quarter of the
    samples, surely more than a tenth) while the own code did the rest: a warning, an error under
    `strict`, as the dispatcher's "part of the work" is (red team round 6, h06b: MKL on three
    quarters of the rows, the own GEMM on the rest, the callee hidden behind a -D macro)."""
    from gatekeeper.behaviour.sample_shares import upper_bound

    classes = section.get("classes") or {}
    library = sum(int(classes.get(c, 0)) for c in ("torch", "vendor", "numpy"))
    compute = library + int(classes.get("own", 0))
    if not section.get("judged") or compute == 0 or library / compute < LIBRARY_PART:
        return []
    if 1.0 - upper_bound(compute - library, compute) < 0.1:
        return []
    top = ", ".join(f"{name} {n}" for name, n in (section.get("symbols") or [])[:3])
    detail = (f"sampled below the dispatcher, torch or vendor code executed {library} of {compute} compute samples "
              f"({library / compute:.0%}): a library did part of the work" + (f" (top symbols: {top})" if top else ""))
    f = finding("GK667", StageName.BEHAVIOUR, {"executing": section}, location, detail=detail,
                trial="the sampled forward calls")
    f.severity = Severity.ERROR if profile == "strict" else Severity.WARNING
    return [f]


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
