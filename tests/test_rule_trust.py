"""The per-rule trust figures (bench/rule_trust.py -> gatekeeper/data/rule_trust.json) stay
true: the hacked-fixture figures are those of the rules as they are now, and `explain` and
docs/rules.md show them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "gatekeeper" / "data" / "rule_trust.json"
sys.path.insert(0, str(ROOT / "bench"))


def test_the_figures_ship_with_both_sets():
    data = json.loads(DATA.read_text("utf-8"))
    assert data["honest"]["files"] > 100 and data["hacked"]["files"] > 20
    for side in ("honest", "hacked"):
        for code, n in data[side]["rejects"].items():
            assert 0 <= n <= data[side]["fires"][code] <= data[side]["files"], (side, code)


@pytest.mark.slow
def test_hacked_figures_match_the_rules_now():
    from rule_trust import measure_fixtures

    stored = json.loads(DATA.read_text("utf-8"))["hacked"]
    now = measure_fixtures(jobs=1)
    assert (now["files"], now["fires"], now["rejects"]) == (stored["files"], stored["fires"], stored["rejects"]), \
        "the rules changed since the figures were measured: run `python bench/rule_trust.py`"


def test_explain_shows_the_figures():
    from gatekeeper.rule_trust import trust_line

    data = json.loads(DATA.read_text("utf-8"))
    code = max(data["hacked"]["fires"], key=data["hacked"]["fires"].get)
    done = subprocess.run([sys.executable, "-m", "gatekeeper", "explain", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    line = trust_line(code)
    assert line and f"of {data['hacked']['files']} hacked fixtures" in line
    assert " ".join(line.split()) in " ".join(done.stdout.split())
