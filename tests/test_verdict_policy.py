"""The verdict policy, enforced by the engine for every rule: a static finding that is not
certain never rejects on its own outside `strict`; the run-time check it names settles it,
and the report links finding -> probe -> outcome."""

from __future__ import annotations

from pathlib import Path

import pytest

import gatekeeper
from gatekeeper.catalogue import catalogue
from gatekeeper.report import Confidence, ProbeOutcome, Severity, StageName
from gatekeeper.static.discovery import discover_rules

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
CPU_MEAN = FIXTURES / "problems/cpu_mean.py"
HARDCODED = FIXTURES / "submissions/cpu_hardcoded_cpp.py"
GUARDED = FIXTURES / "submissions/cpu_guarded_fast_path_cpp.py"
SEED = FIXTURES / "submissions/seed_cached_hardcoded.py"
SEED_PROBLEM = FIXTURES / "problems/seed_mean.py"


def test_every_rule_that_is_not_certain_names_a_run_time_check_that_exists():
    codes = catalogue()
    for rule in discover_rules(()):
        if rule.confidence == Confidence.CERTAIN:
            continue
        assert rule.confirmed_by, f"{rule.code} is {rule.confidence.value} but names no run-time check"
        entry = codes.get(rule.confirmed_by)
        assert entry is not None and entry.stage != StageName.STATIC, \
            f"{rule.code} names {rule.confirmed_by}, which is not a run-time check"


@pytest.mark.parametrize("profile", ["default", "lenient"])
def test_static_only_holds_what_is_not_certain(profile):
    report = gatekeeper.check_static(HARDCODED, CPU_MEAN, profile=profile)
    held = report.unconfirmed()
    assert held, "the baked-in sizes of cpu_hardcoded_cpp are suspicions the jitter trials settle"
    for f in held:
        assert f.severity == Severity.WARNING and f.confidence != Confidence.CERTAIN
        assert f.probe.outcome == ProbeOutcome.UNCONFIRMED and f.probe.static_severity == Severity.ERROR
        assert f.probe.check and "static-only" in f.probe.detail  # says why it is not settled
    assert all(f.confidence == Confidence.CERTAIN for f in report.errors())


def test_strict_keeps_suspicions_as_errors():
    report = gatekeeper.check_static(HARDCODED, CPU_MEAN, profile="strict")
    assert report.verdict.value == "reject" and not report.unconfirmed()
    assert any(f.confidence != Confidence.CERTAIN for f in report.errors())


def test_ids_are_unique_and_in_report_order():
    report = gatekeeper.check_static(SEED, SEED_PROBLEM)
    assert [f.id for f in report.findings] == [f"f{i}" for i in range(1, len(report.findings) + 1)]


def test_text_verdict_line_counts_what_needs_a_run_time_check():
    from gatekeeper.render.text import verdict_line

    report = gatekeeper.check_static(HARDCODED, CPU_MEAN)
    line = verdict_line(report)
    assert f"{len(report.unconfirmed())} unconfirmed suspicion(s) need a run-time check" in line


def test_sarif_carries_the_probe_link():
    from gatekeeper.render.sarif import to_sarif

    report = gatekeeper.check_static(HARDCODED, CPU_MEAN)
    results = to_sarif([report])["runs"][0]["results"]
    linked = [r for r in results if "probe" in r["properties"]]
    assert linked and all(r["properties"]["probe"]["outcome"] == "unconfirmed" for r in linked)


@pytest.mark.slow
def test_the_jitter_trials_confirm_a_held_hardcoded_shape():
    report = gatekeeper.check(HARDCODED, CPU_MEAN, stages="behaviour", keep_going=True)
    runtime = {f.id: f for f in report.findings if f.stage != StageName.STATIC}
    confirmed = [f for f in report.findings if f.probe and f.probe.outcome == ProbeOutcome.CONFIRMED]
    assert report.verdict.value == "reject" and confirmed
    for f in confirmed:
        assert f.severity == Severity.ERROR and f.category.value == "hardcoded-shape"
        assert f.probe.findings and all(i in runtime for i in f.probe.findings)
        assert {runtime[i].rule for i in f.probe.findings} <= {"GK602", "GK604"}


@pytest.mark.slow
def test_the_jitter_trials_clear_a_guarded_fast_path():
    report = gatekeeper.check(GUARDED, CPU_MEAN, stages="behaviour")
    detail = [(f.rule, f.severity.value, f.probe) for f in report.findings]
    assert report.verdict.value == "pass", detail
    cleared = [f for f in report.findings if f.probe and f.probe.outcome == ProbeOutcome.CLEARED]
    assert cleared, detail
    for f in cleared:
        assert f.severity in (Severity.INFO, Severity.WARNING) and "did not see it" in f.probe.detail
