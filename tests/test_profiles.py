"""Profiles (issue 21, item 8): `rules --profile P` shows each code's severity under P, with
the verdict policy (non-certain static findings are unconfirmed warnings outside strict), and
docs/profiles.md's table is the generated one. The real catalogue and CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gatekeeper.catalogue import catalogue, severity_under
from gatekeeper.cli_docs import PROFILE_TABLE_END, PROFILE_TABLE_START, profile_table

ROOT = Path(__file__).resolve().parent.parent


def test_docs_profiles_md_holds_the_generated_table():
    text = (ROOT / "docs" / "profiles.md").read_text("utf-8")
    start, end = text.index(PROFILE_TABLE_START), text.index(PROFILE_TABLE_END) + len(PROFILE_TABLE_END)
    assert text[start:end] == profile_table(catalogue().values()), (
        "docs/profiles.md's table is out of date: regenerate it from gatekeeper.cli_docs.profile_table")
    for profile in ("strict", "default", "lenient"):
        assert f"`{profile}`" in text


def test_the_policy_holds_non_certain_static_errors_outside_strict():
    held = [e for e in catalogue().values()
            if e.stage.value == "static" and e.confidence.value != "certain" and e.severity.value == "error"]
    assert held, "the catalogue has likely/suspect static rules"
    for entry in held:
        assert severity_under(entry, "strict") == ("error", None)
        severity, why = severity_under(entry, "default")
        assert severity == "warning" and why and "unconfirmed" in why
        if entry.confirmed_by:
            assert entry.confirmed_by in why
    certain = catalogue()["GK001"]
    assert {severity_under(certain, p)[0] for p in ("strict", "default", "lenient")} == {"error"}


@pytest.mark.slow
@pytest.mark.parametrize("profile, code, expected", [
    ("strict", "GK201", "error"), ("default", "GK201", "warning"),
    ("strict", "GK612", "error"), ("default", "GK612", "warning"),
    ("default", "GK668", "error"), ("lenient", "GK668", "warning"),
])
def test_rules_profile_shows_each_codes_severity(profile, code, expected):
    done = subprocess.run([sys.executable, "-m", "gatekeeper", "rules", "--profile", profile, "-f", "json"],
                          capture_output=True, text=True, timeout=120, check=True)
    rows = {row["code"]: row for row in json.loads(done.stdout)}
    assert rows[code]["severity"] == expected and rows[code]["profile"] == profile
    if code == "GK201" and profile == "default":
        assert rows[code]["held"] and rows[code]["confirmed_by"] == "GK602"
    text = subprocess.run([sys.executable, "-m", "gatekeeper", "rules", "--profile", profile],
                          capture_output=True, text=True, timeout=120, check=True).stdout
    line = next(l for l in text.splitlines() if l.startswith(code + "\t"))
    assert line.split("\t")[4].startswith(expected)
