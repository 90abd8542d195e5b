"""What users of ruff, flake8 or semgrep expect from a linter's command line, and the
configuration errors that must never pass silently. Real subprocesses, real files."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # runs the CLI end to end (reports, SARIF, problem maps)

ROOT = Path(__file__).resolve().parent.parent
SEED = ROOT / "fixtures" / "submissions" / "seed_cached_hardcoded.py"
HONEST = ROOT / "fixtures" / "submissions" / "seed_honest_generic.py"
PROBLEM = ROOT / "fixtures" / "problems" / "seed_mean.py"


def gk(*args, cwd=None, stdin=None):
    proc = subprocess.run([sys.executable, "-m", "gatekeeper", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd or ROOT, timeout=120, input=stdin)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def test_version():
    proc = gk("--version")
    assert proc.returncode == 0 and re.fullmatch(r"gatekeeper \d+\.\d+\.\d+\n", proc.stdout)


def test_no_problem_fails_closed_unless_the_configuration_allows_it(tmp_path):
    # Default (require_problem = true): what would pass without a problem is an error (exit 3)
    # naming the file and the three ways out; never a pass on what was not checked.
    (tmp_path / "k.py").write_text(HONEST.read_text())
    refused = gk("check", "k.py", "--static-only", "-f", "json", cwd=tmp_path)
    report = json.loads(refused.stdout)
    assert refused.returncode == 3 and report["verdict"] == "error"
    said = " ".join(report["error"].split())
    assert "no problem for k.py" in said and "--problem PATH" in said and "[[problem_map]]" in said
    assert "require_problem = false" in said
    text = gk("check", "k.py", "--static-only", cwd=tmp_path)
    assert text.returncode == 3 and "ERROR k.py" in text.stdout and "no verdict:" in text.stdout
    # Findings still reject without a problem (the pre-commit hook relies on it).
    (tmp_path / "bad.py").write_text("import torch\nclass ModelNew(torch.nn.Module):\n"
                                     "    def forward(self, x):\n        torch.allclose = lambda *a, **k: True\n"
                                     "        return x\n")
    assert gk("check", "bad.py", "--static-only", cwd=tmp_path).returncode == 1
    # require_problem = false: the rules alone may pass it, and GK006 says which rules did not run.
    (tmp_path / "gatekeeper.toml").write_text("require_problem = false\n")
    report = json.loads(gk("check", SEED, "--config", tmp_path / "gatekeeper.toml", "--static-only",
                           "--format", "json").stdout)
    notice = [f for f in report["findings"] if f["rule"] == "GK006"]
    assert notice and notice[0]["severity"] == "warning" and "GK203" in notice[0]["message"]
    allowed = gk("check", "k.py", "--static-only", cwd=tmp_path)
    assert allowed.returncode == 0 and "NoProblemGiven" in allowed.stdout and "did not run" in allowed.stdout
    with_problem = json.loads(gk("check", SEED, "-p", PROBLEM, "--static-only", "--format", "json").stdout)
    assert "GK006" not in {f["rule"] for f in with_problem["findings"]}


def test_exit_zero_keeps_the_report():
    proc = gk("check", SEED, "-p", PROBLEM, "--static-only", "--exit-zero", "-q")
    assert proc.returncode == 0 and proc.stdout.startswith("REJECT")


def test_select_and_ignore_by_code_prefix_and_category():
    only_cached = json.loads(gk("check", SEED, "-p", PROBLEM, "--static-only", "-f", "json", "--select", "GK1").stdout)
    assert {f["rule"][:3] for f in only_cached["findings"]} == {"GK1"}
    proc = gk("check", SEED, "-p", PROBLEM, "--static-only", "-f", "json", "--ignore", "cached-output,hardcoded-shape")
    assert proc.returncode == 0 and json.loads(proc.stdout)["verdict"] == "pass"
    typo = gk("check", SEED, "-p", PROBLEM, "--static-only", "--ignore", "hardcoded-shap")
    assert typo.returncode == 2 and "did you mean 'hardcoded-shape'" in typo.stderr and "--ignore" in typo.stderr


def test_output_file_quiet_verbose_and_color(tmp_path):
    target = tmp_path / "out.txt"
    proc = gk("check", SEED, "-p", PROBLEM, "--static-only", "-o", target, "--color", "always")
    assert proc.returncode == 1 and proc.stdout == ""
    assert "GK101" in target.read_text() and "\x1b[" not in target.read_text()  # files get no colour
    coloured = gk("check", SEED, "-p", PROBLEM, "--static-only", "--color", "always").stdout
    assert "\x1b[" in coloured
    assert "\x1b[" not in gk("check", SEED, "-p", PROBLEM, "--static-only", "--color", "never").stdout
    quiet = gk("check", SEED, "-p", PROBLEM, "--static-only", "-q").stdout
    assert quiet.splitlines() == [l for l in quiet.splitlines() if l.startswith("REJECT")]
    verbose = gk("check", SEED, "-p", PROBLEM, "--static-only", "-v").stdout
    assert "evidence:" in verbose and re.search(r"static: failed in \d", verbose)


def test_stdin_with_a_name_and_a_mapped_problem(tmp_path):
    (tmp_path / "gatekeeper.toml").write_text(
        '[[problem_map]]\nsubmissions = "solutions/*.py"\nproblem = "' + PROBLEM.as_posix() + '"\n')
    proc = gk("check", "-", "--static-only", "-f", "json", "--stdin-filename", "solutions/k.py",
              cwd=tmp_path, stdin=SEED.read_text())
    report = json.loads(proc.stdout)
    assert proc.returncode == 1 and report["submission"]["path"] == "solutions/k.py"
    assert report["problem"]["name"] == "seed_mean"
    assert all(f["location"]["path"] == "solutions/k.py" for f in report["findings"] if f["location"])


def test_totals_at_the_end_of_a_multi_file_run(tmp_path):
    (tmp_path / "a.py").write_text(HONEST.read_text())
    (tmp_path / "b.py").write_text(SEED.read_text())
    proc = gk("check", tmp_path, "-p", PROBLEM, "--static-only", "-q")
    lines = proc.stdout.strip().splitlines()
    assert lines[-2] == "2 file(s): 1 pass, 1 reject, 0 error"
    # The seed's baked-in sizes are certain; its persistent output is held for GK610.
    assert lines[-1].startswith("  error findings by category:") and "hardcoded-shape" in lines[-1]


def test_kernelbench_problem_map_needs_no_flag(tmp_path):
    (tmp_path / "KernelBench" / "level1").mkdir(parents=True)
    (tmp_path / "KernelBench" / "level1" / "7_seed_mean.py").write_text(PROBLEM.read_text())
    (tmp_path / "KernelBench" / "level1" / "17_other.py").write_text(PROBLEM.read_text())
    (tmp_path / "runs" / "level1").mkdir(parents=True)
    (tmp_path / "runs" / "level1" / "7_attempt.py").write_text(SEED.read_text())
    (tmp_path / "pyproject.toml").write_text(
        '[tool.gatekeeper]\n[[tool.gatekeeper.problem_map]]\n'
        'submissions = "runs/level{level}/{id}_*.py"\nproblem = "KernelBench/level{level}/{id}_*.py"\n')
    report = json.loads(gk("check", "runs/level1/7_attempt.py", "--static-only", "-f", "json", cwd=tmp_path).stdout)
    assert report["problem"]["name"] == "7_seed_mean"
    assert {"GK203", "GK101"} <= {f["rule"] for f in report["findings"]}
    (tmp_path / "runs" / "level1" / "9_attempt.py").write_text(SEED.read_text())
    missing = gk("check", "runs/level1/9_attempt.py", "--static-only", cwd=tmp_path)
    assert missing.returncode == 2 and "KernelBench/level1/9_*.py" in missing.stderr and "matches no file" in missing.stderr


def test_malformed_pyproject_is_an_error_naming_the_file(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.gatekeeper\nprofile = "strict"\n')
    (tmp_path / "k.py").write_text(HONEST.read_text())
    proc = gk("check", "k.py", "--static-only", cwd=tmp_path)
    assert proc.returncode == 2 and "pyproject.toml" in proc.stderr and "not valid TOML" in proc.stderr


def test_unknown_keys_codes_and_options_suggest_the_closest(tmp_path):
    sub = tmp_path / "k.py"
    sub.write_text(HONEST.read_text())
    cases = {
        'profle = "strict"\n': ("'profle'", "did you mean 'profile'"),
        "[rules.GK2O3]\nenabled = false\n": ("'GK2O3'", "did you mean 'GK203'"),
        "[rules.GK203]\nenabeld = false\n": ("rules.GK203.enabeld", "did you mean 'enabled'"),
        "[rules.GK610]\noptions = { tolerance = 1 }\n": ("'tolerance'", "GK610"),
    }
    for text, expected in cases.items():
        (tmp_path / "gatekeeper.toml").write_text(text)
        proc = gk("check", sub, "--static-only")
        assert proc.returncode == 2, text
        for fragment in expected:
            assert fragment in proc.stderr, (text, proc.stderr)
        assert "gatekeeper.toml" in proc.stderr


def test_every_code_is_listed_and_explained():
    listed = gk("rules").stdout.splitlines()
    codes = {line.split("\t")[0] for line in listed}
    assert {"GK101", "GK006", "GK610", "GK650", "GK680", "GK701", "GK709"} <= codes
    stages = {line.split("\t")[3] for line in listed}
    assert stages == {"static", "build", "behaviour", "timing"}
    for code in ("GK610", "GK701"):  # a behaviour and a timing check (static ones: test_cli)
        proc = gk("explain", code)
        assert proc.returncode == 0 and proc.stdout.startswith(code) and "Fix:" in proc.stdout, code
    near = gk("explain", "GK61O")
    assert near.returncode == 2 and "did you mean GK610" in near.stderr


def test_run_time_codes_are_configurable_like_rules(tmp_path):
    from gatekeeper.runtime.checks import finding
    from gatekeeper.catalogue import configured
    from gatekeeper.config import load_config
    from gatekeeper.report import StageName

    (tmp_path / "gatekeeper.toml").write_text('[rules.GK610]\nseverity = "warning"\n[rules.GK625]\nenabled = false\n')
    config = load_config(search_from=tmp_path)
    found = [finding("GK610", StageName.BEHAVIOUR, what="changed"), finding("GK625", StageName.BEHAVIOUR, index=0)]
    assert [(f.rule, f.severity.value) for f in configured(found, config)] == [("GK610", "warning")]
    ignored = load_config(search_from=tmp_path, overrides={"ignore": ["behaviour"]})
    assert configured(found, ignored) == [] and ignored.rule("GK101").enabled


def test_sarif_describes_codes_and_infrastructure_errors(tmp_path):
    sarif = json.loads(gk("check", SEED, "-p", PROBLEM, "--static-only", "-f", "sarif").stdout)
    run = sarif["runs"][0]
    assert run["invocations"][0]["executionSuccessful"] is True
    for rule in run["tool"]["driver"]["rules"]:
        assert rule["helpUri"].endswith("#" + rule["id"].lower())
        assert "\n    " not in rule["fullDescription"]["text"]  # dedented
    broken = tmp_path / "problem.py"
    broken.write_text("def broken(:\n")
    proc = gk("check", SEED, "-p", broken, "--static-only", "-f", "sarif")
    assert proc.returncode == 3
    invocation = json.loads(proc.stdout)["runs"][0]["invocations"][0]
    assert invocation["executionSuccessful"] is False
    assert "does not parse" in invocation["toolExecutionNotifications"][0]["message"]["text"]


def test_text_report_wraps_says_same_fix_and_drops_a_repeated_cpp_line():
    from rich.console import Console

    from gatekeeper.render.text import print_report
    from gatekeeper.report import Category, Environment, FileRef, Finding, Location, Report, Severity, StageName

    long = "word " * 60
    same = "int n = 768;"
    findings = [Finding(rule="GK203", name="X", category=Category.HARDCODED_SHAPE, severity=Severity.ERROR,
                        stage=StageName.STATIC, message=long, hint="read sizes from the inputs",
                        location=Location(path="k.py", line=3, column=1),
                        evidence={"source_line": same, "cpp_line": same}, confidence="suspect",
                        confirmed_by="GK602") for _ in range(2)]
    report = Report(verdict="reject", submission=FileRef(path="k.py", sha256="0"), profile="default",
                    findings=findings, environment=Environment(gatekeeper="0", python="3"))
    console = Console(width=60, record=True, color_system=None, soft_wrap=True)  # as the CLI's
    print_report(report, console)
    text = console.export_text()
    message_lines = [line for line in text.splitlines() if "word" in line]
    assert len(message_lines) > 4 and all(len(line) <= 60 and line.startswith("  word") for line in message_lines)
    assert "C++ |" not in text
    assert text.count("read sizes from the inputs") == 1 and "same fix as above" in text
    assert "confidence suspect" in text and "run-time check GK602" in text


def test_py_typed_is_shipped():
    import gatekeeper

    assert (Path(gatekeeper.__file__).parent / "py.typed").is_file()
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert '"py.typed"' in pyproject


def test_every_code_has_its_section_in_docs_rules_md():
    """SARIF's helpUri points at docs/rules.md#<code>: every code must have its anchor there."""
    from gatekeeper.catalogue import catalogue

    text = (ROOT / "docs" / "rules.md").read_text("utf-8")
    missing = [code for code in catalogue() if f'<a id="{code.lower()}"></a>' not in text]
    assert not missing, (f"docs/rules.md lacks {missing}: regenerate it with "
                         "`gatekeeper rules --format markdown > docs/rules.md`")


def test_github_annotations_carry_confidence_and_the_confirming_check():
    from gatekeeper.render.github import to_github
    from gatekeeper.report import Category, Environment, FileRef, Finding, Location, Report, Severity, StageName

    finding = Finding(rule="GK201", name="LiteralAllocationShape", category=Category.HARDCODED_SHAPE,
                      severity=Severity.WARNING, stage=StageName.STATIC, message="m", hint="h",
                      location=Location(path="k.py", line=3, column=1), confidence="likely", confirmed_by="GK602")
    report = Report(verdict="pass", submission=FileRef(path="k.py", sha256="0"), profile="default",
                    findings=[finding], environment=Environment(gatekeeper="0", python="3"))
    line = to_github([report])
    assert line.startswith("::warning file=k.py,line=3")
    assert "title=GK201 LiteralAllocationShape (hardcoded-shape%2C likely%2C run-time check GK602)" in line


def test_the_python_api_and_the_agent_tool_fail_closed_too(tmp_path):
    # The same policy whichever surface asks: the API and the MCP tool never pass a check
    # that had no problem; findings still reject, and the configuration may allow it.
    import gatekeeper
    from gatekeeper.agent.tools import static_check
    from gatekeeper.config import Config

    api = gatekeeper.check_static(HONEST.read_text())
    assert api.verdict.value == "error" and "problem=" in " ".join(api.error.split())
    tool = static_check(HONEST.read_text())
    assert tool.verdict.value == "error" and "no problem for" in tool.error
    bad = "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n" \
          "        torch.allclose = lambda *a, **k: True\n        return x\n"
    assert gatekeeper.check_static(bad).verdict.value == "reject"
    allowed = gatekeeper.check_static(HONEST.read_text(), config=Config(require_problem=False))
    assert allowed.verdict.value == "pass" and "GK006" in {f.rule for f in allowed.findings}
    assert gatekeeper.check_static(HONEST, PROBLEM).verdict.value == "pass"
