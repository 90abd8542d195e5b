"""The text report's `C++ |` line (gatekeeper/render/text.py): shown when the C++ source
line differs from the Python line the finding points at, dropped when it repeats it
(README "Using it")."""

from __future__ import annotations

from rich.console import Console

from gatekeeper.render.text import print_report
from gatekeeper.report import Category, Environment, FileRef, Finding, Location, Report, Severity, StageName


def _text(source_line: str, cpp_line: str) -> str:
    finding = Finding(rule="GK203", name="ProblemSizeInKernelSource", category=Category.HARDCODED_SHAPE,
                      severity=Severity.ERROR, stage=StageName.STATIC, message="m", hint="h",
                      location=Location(path="k.py", line=3, column=1),
                      evidence={"source_line": source_line, "cpp_line": cpp_line})
    report = Report(verdict="reject", submission=FileRef(path="k.py", sha256="0"), profile="default",
                    findings=[finding], environment=Environment(gatekeeper="0", python="3"))
    console = Console(width=100, record=True, color_system=None, soft_wrap=True)
    print_report(report, console)
    return console.export_text()


def test_a_different_cpp_line_is_shown_under_the_python_line():
    text = _text('cpp_src = """', "    out[i] = x[i + 768];")
    lines = text.splitlines()
    python_at = next(i for i, line in enumerate(lines) if 'cpp_src = """' in line)
    cpp_at = next(i for i, line in enumerate(lines) if "C++ |" in line)
    assert cpp_at > python_at and lines[cpp_at].endswith("|     out[i] = x[i + 768];")


def test_a_cpp_line_equal_to_the_python_line_is_dropped():
    assert "C++ |" not in _text("int n = 768;", "int n = 768;")
    assert "C++ |" not in _text("    int n = 768;", "int n = 768;  ")  # only the indentation differs
