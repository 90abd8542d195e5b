"""`gatekeeper explain` for every code: what, why, the fix, and for the run-time codes a flagged
and a clean example, from the texts inside the package, so that an installed wheel explains
them too (issue 21, item 7). Names are unique; renamed codes are still found by their old name."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gatekeeper.catalogue import catalogue, lookup
from gatekeeper.report import StageName
from gatekeeper.runtime.check_docs import doc_for

ROOT = Path(__file__).resolve().parent.parent
RUN_TIME = [code for code, e in catalogue().items() if e.stage != StageName.STATIC]
PLACEHOLDER = re.compile(r"<(what|why|detail|trial|shapes|[a-z]+_[a-z_]+)>")


def test_the_catalogue_has_run_time_codes():
    assert len(RUN_TIME) >= 40 and {"GK610", "GK630", "GK677", "GK680", "GK701"} <= set(RUN_TIME)


@pytest.mark.parametrize("code", RUN_TIME)
def test_every_run_time_code_has_what_why_and_two_examples(code):
    doc = doc_for(code)
    assert doc is not None, f"{code} has no explain text (gatekeeper/runtime/check_docs_*.py)"
    for field in (doc.what, doc.why, doc.flagged, doc.clean):
        assert field.strip() and not PLACEHOLDER.search(field), (code, field)
    assert doc.flagged != doc.clean
    for example in (doc.flagged, doc.clean):
        ast.parse(example)  # examples are Python a reader can paste
    entry = catalogue()[code]
    assert entry.invalid_example == doc.flagged and entry.valid_example == doc.clean
    assert doc.what[1:] in entry.docs and doc.why in entry.docs and not PLACEHOLDER.search(entry.docs)


def test_no_two_codes_share_a_name_and_old_names_still_resolve():
    names = [e.name.lower() for e in catalogue().values()]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)
    assert lookup("NoModelNew").code == "GK666" and lookup("PatchesHarness").code == "GK414"
    assert catalogue()["GK635"].summary == "not a plain tensor"
    assert catalogue()["GK006"].category.value == "not-checked"  # a notice, not a hardcoded shape


def test_run_time_messages_name_no_bare_trial():
    from gatekeeper.report import Location
    from gatekeeper.runtime.checks import finding

    hacked = ROOT / "fixtures" / "submissions" / "cpu_cached_python.py"
    text = hacked.read_text()
    class_line = text[:text.index("class ModelNew")].count("\n") + 1
    where = Location(path=str(hacked), line=class_line, column=1)
    f = finding("GK630", StageName.BEHAVIOUR, {"shapes": [[4, 20, 40]]}, where, trial="jitter-2", detail="d")
    assert "jitter-2" not in f.message and "jittered shapes (set 2; input shapes [4, 20, 40])" in f.message
    assert f.evidence["trial"] == "jitter-2"  # the raw name stays for machines
    alias = finding("GK610", StageName.BEHAVIOUR, {}, where, trial="jitter-1",
                    what="its output shares storage with the output of nominal")
    assert "output of nominal" not in alias.message and "the first call" in alias.message
    # An output finding points at forward's return, with its line; a crash keeps the class line.
    assert alias.location.line > class_line and alias.evidence["source_line"].strip().startswith("return")
    crash = finding("GK662", StageName.BEHAVIOUR, {}, where, detail="segfault")
    assert crash.location.line == class_line and "source_line" not in crash.evidence


def test_gk677_fix_does_not_blame_state_for_a_wrong_formula():
    hint = catalogue()["GK677"].hint
    assert "Wrong on every call: the formula itself differs" in hint


@pytest.mark.slow
def test_an_installed_wheel_explains_every_code(tmp_path):
    """The wheel in a fresh virtual environment, run from outside the source tree."""
    wheels, venv = tmp_path / "wheels", tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w",
                    str(wheels), str(ROOT)], check=True, timeout=600, capture_output=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q"]
    subprocess.run([*pip, "--no-deps", *map(str, wheels.glob("kernel_gatekeeper-*.whl"))], check=True, timeout=600,
                   capture_output=True)
    subprocess.run([*pip, "libcst", "pydantic", "typer", "rich", "pyyaml"], check=True, timeout=600,
                   capture_output=True)
    script = ("import json, gatekeeper\n"
              "from typer.testing import CliRunner\n"
              "from gatekeeper.cli import app\n"
              "from gatekeeper.catalogue import catalogue\n"
              "runner = CliRunner()\n"
              "out = {c: [runner.invoke(app, ['explain', c]).exit_code, runner.invoke(app, ['explain', c]).output]"
              " for c in catalogue()}\n"
              "print(json.dumps({'file': gatekeeper.__file__, 'out': out}))\n")
    done = subprocess.run([str(venv / "bin" / "python"), "-c", script], capture_output=True, text=True,
                          timeout=600, cwd=tmp_path, check=True)
    result = json.loads(done.stdout)
    assert result["file"].startswith(str(venv))  # the installed copy, not the source tree
    assert set(result["out"]) == set(catalogue())
    for code, (exit_code, text) in result["out"].items():
        assert exit_code == 0 and text.startswith(code) and "Fix:" in text, (code, text[:300])
        assert not re.search(r"<(what|why|detail|trial|where|names|event|target|phase)>", text), (code, text)
        if code in RUN_TIME:
            assert "Why it matters:" in text and "Flagged:" in text and "Not flagged:" in text, (code, text)
