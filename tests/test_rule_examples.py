"""Every rule's VALID and INVALID examples, run through the real engine."""

import pytest

from gatekeeper.static.discovery import discover_rules
from gatekeeper.static.load_checks import LOAD_RULES
from gatekeeper.static.testing import static_findings

RULES = [r for r in discover_rules() if r not in LOAD_RULES]
INVALID = [(r, i) for r in RULES for i in range(len(r.INVALID))]
VALID = [(r, i) for r in RULES for i in range(len(r.VALID))]


def test_every_rule_has_examples_both_ways():
    for rule in RULES:
        assert rule.INVALID, f"{rule.code} has no INVALID example"
        assert rule.VALID, f"{rule.code} has no VALID example"


@pytest.mark.parametrize("rule,index", INVALID, ids=[f"{r.code}-invalid-{i}" for r, i in INVALID])
def test_invalid_example_is_flagged(rule, index):
    findings = static_findings(rule.INVALID[index], rule.EXAMPLE_PROBLEM, profile="strict")
    codes = [f.rule for f in findings]
    assert rule.code in codes, f"{rule.code} missed:\n{rule.INVALID[index]}\nfound: {codes}"
    mine = [f for f in findings if f.rule == rule.code]
    assert all(f.location is not None for f in mine), "every static finding needs a location"
    assert all(f.category == rule.category for f in mine)


@pytest.mark.parametrize("rule,index", VALID, ids=[f"{r.code}-valid-{i}" for r, i in VALID])
def test_valid_example_is_clean(rule, index):
    findings = static_findings(rule.VALID[index], rule.EXAMPLE_PROBLEM, profile="strict")
    hits = [f"{f.rule} line {f.location.line if f.location else '?'}: {f.message}" for f in findings if f.rule == rule.code]
    assert not hits, f"{rule.code} false positive on:\n{rule.VALID[index]}\n" + "\n".join(hits)


def test_rule_codes_are_unique_and_well_formed():
    rules = discover_rules()
    codes = [r.code for r in rules]
    assert len(codes) == len(set(codes))
    for rule in rules:
        assert rule.code.startswith("GK") and rule.code[2:].isdigit() and len(rule.code) == 5
        assert rule.name[0].isupper() and " " not in rule.name
        assert rule.summary and rule.message and rule.hint and rule.docs()


def test_duplicate_code_in_user_dir_is_a_usage_error(tmp_path):
    from gatekeeper.errors import UsageError

    (tmp_path / "dup.py").write_text(
        "from gatekeeper.static.rule import Rule\nfrom gatekeeper.report import Category\n"
        "class Dup(Rule):\n    code = 'GK101'\n    name = 'Dup'\n    category = Category.CACHED_OUTPUT\n"
        "    summary = message = hint = 'x'\n"
    )
    with pytest.raises(UsageError, match="GK101 is defined twice"):
        discover_rules([str(tmp_path)])
