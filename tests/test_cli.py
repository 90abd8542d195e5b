"""The command line as users and CI run it: real subprocesses, real files, exit codes."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # every test runs the CLI on real submissions, the run stages included

ROOT = Path(__file__).resolve().parent.parent
SEED = ROOT / "fixtures" / "submissions" / "seed_cached_hardcoded.py"
HONEST = ROOT / "fixtures" / "submissions" / "seed_honest_generic.py"
PROBLEM = ROOT / "fixtures" / "problems" / "seed_mean.py"


def gk(*args, cwd=None):
    proc = subprocess.run([sys.executable, "-m", "gatekeeper", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd or ROOT, timeout=120)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def test_seed_is_rejected_with_both_categories_on_the_right_lines():
    proc = gk("check", SEED, "--problem", PROBLEM, "--static-only", "--format", "json")
    assert proc.returncode == 1
    report = json.loads(proc.stdout)
    from gatekeeper.report import SCHEMA_VERSION

    assert report["schema_version"] == SCHEMA_VERSION and report["verdict"] == "reject"
    by_category = {}
    for f in report["findings"]:
        by_category.setdefault(f["category"], set()).add(f["location"]["line"])
    assert 45 in by_category["cached-output"]  # return _ext.mean_rank4_out(x, y)
    assert {14, 15, 16} <= by_category["hardcoded-shape"]  # x + 768 / 1536 / 2304
    for f in report["findings"]:
        assert f["message"] and f["hint"] and f["stage"] == "static"


def test_honest_passes_and_says_which_stages_did_not_run():
    proc = gk("check", HONEST, "--problem", PROBLEM, "--format", "json")
    report = json.loads(proc.stdout)
    assert not [f for f in report["findings"] if f["severity"] == "error"]
    statuses = {s["name"]: s["status"] for s in report["stages"]}
    assert statuses["static"] == "passed"
    assert statuses["timing"] == "skipped"
    # Whatever build/behaviour did, they are never reported as passed without running.
    for stage in report["stages"]:
        if stage["status"] in ("skipped", "not-implemented", "error"):
            assert stage["reason"]


def test_text_output_shows_source_lines_and_fix():
    proc = gk("check", SEED, "--problem", PROBLEM, "--static-only")
    assert proc.returncode == 1
    assert "return _ext.mean_rank4_out(x, y)" in proc.stdout
    assert "fix:" in proc.stdout and "GK101" in proc.stdout and "REJECT" in proc.stdout


def test_folder_gives_json_lines_and_worst_exit_code(tmp_path):
    (tmp_path / "a.py").write_text(HONEST.read_text())
    (tmp_path / "b.py").write_text(SEED.read_text())
    proc = gk("check", tmp_path, "--problem", PROBLEM, "--static-only", "--format", "jsonl", "--jobs", "2")
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [Path(r["submission"]["path"]).name for r in lines] == ["a.py", "b.py"]
    assert [r["verdict"] for r in lines] == ["pass", "reject"]
    assert proc.returncode == 1
    # json is always one document: an array for a folder or several paths.
    whole = json.loads(gk("check", tmp_path, "--problem", PROBLEM, "--static-only", "--format", "json").stdout)
    assert [r["verdict"] for r in whole] == ["pass", "reject"]


def test_sarif_output_is_sarif_2_1_0():
    proc = gk("check", SEED, "--problem", PROBLEM, "--static-only", "--format", "sarif")
    sarif = json.loads(proc.stdout)
    assert sarif["version"] == "2.1.0" and sarif["$schema"].endswith("sarif-2.1.0.json")
    run = sarif["runs"][0]
    rule_ids = [r["id"] for r in run["tool"]["driver"]["rules"]]
    assert run["results"]
    for result in run["results"]:
        assert result["ruleId"] == rule_ids[result["ruleIndex"]]
        assert result["level"] in ("error", "warning", "note")
        region = result["locations"][0]["physicalLocation"]["region"]
        assert region["startLine"] >= 1 and region["startColumn"] >= 1
        uri = result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
        assert not uri.startswith("/")  # relative to the repository root, as code scanning wants


def test_github_annotations():
    proc = gk("check", SEED, "--problem", PROBLEM, "--static-only", "--format", "github")
    lines = proc.stdout.splitlines()
    assert lines and all(line.startswith("::error ") or line.startswith("::warning ") for line in lines)
    assert any("line=45" in line and "GK101" in line for line in lines)


@pytest.mark.parametrize("content,rule", [
    (b"", "GK004"),
    (b"   \n\n", "GK004"),
    (b"\x89PNG\r\n\x1a\n\x00\x00binary", "GK001"),
    ("caf\u00e9 = 1\n".encode("latin-1"), "GK001"),
    (b"def broken(:\n    pass\n", "GK003"),
    (b"This is not Python, it is prose about kernels.\n", "GK003"),
    (b"import torch\nclass Model(torch.nn.Module):\n    pass\n", "GK005"),
    (b"x = 1\n" * 400_000, "GK002"),
], ids=["empty", "blank", "binary", "latin-1", "syntax", "prose", "no-modelnew", "too-large"])
# (ids: the default id of the 2.4 MB case would go into PYTEST_CURRENT_TEST, too long for exec)
def test_bad_submissions_get_a_clear_finding(tmp_path, content, rule):
    path = tmp_path / "sub.py"
    path.write_bytes(content)
    proc = gk("check", path, "--problem", PROBLEM, "--static-only", "--format", "json")
    assert proc.returncode == 1
    report = json.loads(proc.stdout)
    assert report["verdict"] == "reject"
    assert rule in [f["rule"] for f in report["findings"]]


def test_missing_submission_or_problem_is_a_usage_error(tmp_path):
    assert gk("check", tmp_path / "nope.py").returncode == 2
    proc = gk("check", SEED, "--problem", tmp_path / "nope.py", "--static-only")
    assert proc.returncode == 2 and "problem file not found" in proc.stderr


def test_broken_problem_is_an_internal_error_not_a_reject(tmp_path):
    problem = tmp_path / "p.py"
    problem.write_text("def get_inputs(:\n")
    proc = gk("check", SEED, "--problem", problem, "--static-only", "--format", "json")
    assert proc.returncode == 3
    report = json.loads(proc.stdout)
    assert report["verdict"] == "error" and "does not parse" in report["error"]


def test_unknown_config_key_names_key_and_file(tmp_path):
    (tmp_path / "gatekeeper.toml").write_text('profile = "strict"\nprofil = "x"\n')
    sub = tmp_path / "s.py"
    sub.write_text(HONEST.read_text())
    proc = gk("check", sub, "--static-only")
    assert proc.returncode == 2
    assert "profil" in proc.stderr and "gatekeeper.toml" in proc.stderr


def test_config_show_resolves_pyproject_section(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.gatekeeper]\nprofile = "lenient"\n[tool.gatekeeper.rules.GK101]\nseverity = "warning"\n')
    proc = gk("config", "show", "--for", tmp_path)
    shown = json.loads(proc.stdout)
    assert shown["profile"] == "lenient" and shown["source"].endswith("pyproject.toml")
    assert shown["rules"]["GK101"]["severity"] == "warning"


def test_suppression_comments_are_ignored_unless_allowed(tmp_path):
    source = SEED.read_text().replace("return _ext.mean_rank4_out(x, y)",
                                      "return _ext.mean_rank4_out(x, y)  # gatekeeper: ignore[GK101]")
    sub = tmp_path / "s.py"
    sub.write_text(source)
    report = json.loads(gk("check", sub, "--problem", PROBLEM, "--static-only", "--format", "json").stdout)
    assert "GK101" in [f["rule"] for f in report["findings"]]
    (tmp_path / "gatekeeper.toml").write_text("allow_suppressions = true\n")
    report = json.loads(gk("check", sub, "--problem", PROBLEM, "--static-only", "--format", "json").stdout)
    assert "GK101" not in [f["rule"] for f in report["findings"]]


def test_rule_severity_override_and_disable(tmp_path):
    sub = tmp_path / "s.py"
    sub.write_text(SEED.read_text())
    (tmp_path / "gatekeeper.toml").write_text('[rules.GK101]\nseverity = "warning"\n[rules.GK203]\nenabled = false\n')
    report = json.loads(gk("check", sub, "--problem", PROBLEM, "--static-only", "--format", "json").stdout)
    gk101 = [f for f in report["findings"] if f["rule"] == "GK101"]
    assert gk101 and all(f["severity"] == "warning" for f in gk101)
    assert not [f for f in report["findings"] if f["rule"] == "GK203"]


def test_rules_explain_and_schema():
    listing = gk("rules").stdout
    assert "GK101" in listing and "ReturnsPersistentTensor" in listing
    explained = gk("explain", "GK101")
    assert explained.returncode == 0 and "Flagged:" in explained.stdout and "Not flagged:" in explained.stdout
    assert gk("explain", "GK999").returncode == 2
    schema = json.loads(gk("schema").stdout)
    assert "findings" in schema["properties"] and "Finding" in schema["$defs"]


def test_user_rule_directory_is_discovered(tmp_path):
    rules = tmp_path / "myrules"
    rules.mkdir()
    (rules / "no_print.py").write_text(
        "import libcst as cst\nfrom gatekeeper.static.rule import Rule\nfrom gatekeeper.report import Category\n"
        "class PrintsInForward(Rule):\n    code = 'GK901'\n    name = 'PrintsInForward'\n"
        "    category = Category.SANDBOX_ESCAPE\n    summary = message = hint = 'no print'\n"
        "    def visit_Call(self, node):\n        if self.ctx.qualname(node.func) == 'builtins.print':\n            self.report(node)\n"
    )
    (tmp_path / "gatekeeper.toml").write_text('rule_dirs = ["myrules"]\n')
    sub = tmp_path / "s.py"
    sub.write_text("import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        print(x)\n        return x\n")
    report = json.loads(gk("check", sub, "--problem", PROBLEM, "--static-only", "--format", "json").stdout)
    assert [f["location"]["line"] for f in report["findings"] if f["rule"] == "GK901"] == [4]
