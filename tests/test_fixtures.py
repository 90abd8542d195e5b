"""Every labelled fixture gets the verdict and the categories its manifest entry names."""

import sys
from pathlib import Path

import pytest

import gatekeeper

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def _cases():
    cases = []
    for manifest in sorted((FIXTURES / "manifest").glob("*.toml")):
        for case in tomllib.loads(manifest.read_text("utf-8")).get("case", []):
            cases.append(pytest.param(case, id=f"{manifest.stem}:{Path(case['submission']).stem}"))
    return cases


CASES = _cases()


def test_manifest_is_not_empty_and_files_exist():
    assert len(CASES) >= 2
    for param in CASES:
        case = param.values[0]
        assert (FIXTURES / case["submission"]).is_file(), case["submission"]
        if case.get("problem"):
            assert (FIXTURES / case["problem"]).is_file(), case["problem"]
        assert case["verdict"] in ("pass", "reject")


@pytest.mark.parametrize("case", [c for c in CASES if c.values[0].get("mode", "static") == "static"])
def test_static_fixture(case):
    problem = FIXTURES / case["problem"] if case.get("problem") else None
    report = gatekeeper.check_static(FIXTURES / case["submission"], problem, profile=case.get("profile", "default"))
    errors = sorted({f.category.value for f in report.errors()})
    detail = "\n".join(f"  {f.rule} {f.category.value} line {f.location.line if f.location else '?'}: {f.message}"
                       for f in report.findings)
    assert report.verdict.value == case["verdict"], f"{case['submission']}: got {report.verdict.value}\n{detail}"
    if case["verdict"] == "pass":
        assert not errors, f"honest fixture has error findings:\n{detail}"
    for category in case["categories"]:
        assert category in errors, f"{case['submission']}: {category} not reported\n{detail}"
