"""Every rule's VALID and INVALID examples, run through the real engine."""

import pytest

from gatekeeper.config import Config

from gatekeeper.static.discovery import BUILTIN_RULES, discover_rules
from gatekeeper.static.examples import Invalid, Valid, as_invalid, as_valid, snippet
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
    example = as_invalid(rule.INVALID[index])
    findings = static_findings(example.source, rule.EXAMPLE_PROBLEM, profile="strict")
    codes = [f.rule for f in findings]
    assert rule.code in codes, f"{rule.code} missed:\n{example.source}\nfound: {codes}"
    mine = [f for f in findings if f.rule == rule.code]
    assert all(f.location is not None for f in mine), "every static finding needs a location"
    assert all(f.category == rule.category for f in mine)
    # The stated location and message fragment: one finding of the rule must match all of them.
    seen = [f"line {f.location.line} col {f.location.column}: {f.message}" for f in mine]
    matching = [
        f for f in mine
        if (example.line is None or f.location.line == example.line)
        and (example.col is None or f.location.column == example.col)
        and (example.message is None or example.message in f.message)
    ]
    assert matching, (
        f"{rule.code} INVALID[{index}] expected line {example.line}"
        + (f" col {example.col}" if example.col else "")
        + f" with message containing {example.message!r}; found:\n" + "\n".join(seen)
    )


@pytest.mark.parametrize("rule,index", VALID, ids=[f"{r.code}-valid-{i}" for r, i in VALID])
def test_valid_example_is_clean(rule, index):
    source = as_valid(rule.VALID[index]).source
    findings = static_findings(source, rule.EXAMPLE_PROBLEM, profile="strict")
    hits = [f"{f.rule} line {f.location.line if f.location else '?'}: {f.message}" for f in findings if f.rule == rule.code]
    assert not hits, f"{rule.code} false positive on:\n{source}\n" + "\n".join(hits)


def test_builtin_examples_state_location_and_message():
    """Built-in rules write Valid(...) / Invalid(..., line=, message=); plain strings are
    only for user rule folders written before the objects existed."""
    problems = []
    for rule in RULES:
        if not rule.source_file.startswith(str(BUILTIN_RULES)):
            continue
        for i, ex in enumerate(rule.VALID):
            if not isinstance(ex, Valid):
                problems.append(f"{rule.code} VALID[{i}] is a {type(ex).__name__}, not Valid(...)")
        for i, ex in enumerate(rule.INVALID):
            if not isinstance(ex, Invalid) or ex.line is None or not ex.message:
                problems.append(f"{rule.code} INVALID[{i}] does not state line= and message=")
    assert not problems, "\n".join(problems)


def test_snippet_dedents_a_block():
    assert snippet("""
        import torch
        if x:
            y = 1
    """) == "import torch\nif x:\n    y = 1\n"
    assert snippet("a\n") == "a\n"


def test_plain_string_examples_from_user_folders_still_run(tmp_path):
    (tmp_path / "old_style.py").write_text(
        "import libcst as cst\n"
        "from gatekeeper.static.rule import Rule\nfrom gatekeeper.report import Category\n"
        "class CallsPrint(Rule):\n    code = 'GK901'\n    name = 'CallsPrint'\n"
        "    category = Category.DYNAMIC_CODE\n    summary = message = hint = 'prints'\n"
        "    VALID = ['x = 1\\n']\n    INVALID = ['print(1)\\n']\n"
        "    def visit_Call(self, node: cst.Call) -> None:\n"
        "        if self.ctx.qualname(node.func) == 'builtins.print':\n            self.report(node)\n"
    )
    rule = next(r for r in discover_rules([str(tmp_path)]) if r.code == "GK901")
    example = as_invalid(rule.INVALID[0])
    assert example == Invalid("print(1)\n") and as_valid(rule.VALID[0]) == Valid("x = 1\n")
    config = Config(profile="strict", rule_dirs=[str(tmp_path)])
    flagged = [f for f in static_findings(example.source, config=config) if f.rule == "GK901"]
    assert [f.location.line for f in flagged] == [1]
    assert not [f for f in static_findings(rule.VALID[0], config=config) if f.rule == "GK901"]


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
