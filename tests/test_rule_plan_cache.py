"""The static stage works out the active rules and severities once per configuration; a
configuration changed in place between files must still be honoured."""

from pathlib import Path

from gatekeeper.config import Config, RuleSettings
from gatekeeper.report import Severity
from gatekeeper.static.problem_facts import load_problem_facts
from gatekeeper.static.stage import run_static

ROOT = Path(__file__).resolve().parent.parent
SEED = ROOT / "fixtures" / "submissions" / "seed_cached_hardcoded.py"
PROBLEM = ROOT / "fixtures" / "problems" / "seed_mean.py"


def _codes(config: Config) -> dict[str, Severity]:
    found = run_static(SEED.read_bytes(), str(SEED), config, load_problem_facts(PROBLEM))
    return {f.rule: f.severity for f in found}


def test_a_rule_switched_off_in_place_is_off_for_the_next_file():
    config = Config()
    first = _codes(config)
    rule = next(code for code, severity in first.items() if severity == Severity.ERROR)
    config.rules[rule] = RuleSettings(enabled=False)
    assert rule not in _codes(config)
    config.rules[rule].enabled = True
    assert rule in _codes(config)


def test_a_severity_changed_in_place_applies():
    config = Config()
    first = _codes(config)
    rule = next(code for code, severity in first.items() if severity == Severity.ERROR)
    config.rules[rule] = RuleSettings(severity=Severity.INFO)
    assert _codes(config)[rule] == Severity.INFO
    config.rules.clear()
    assert _codes(config) == first
