"""Build stage pieces: cache key, compiler error mapping, and the needs-CUDA error."""

from pathlib import Path

import pytest

import gatekeeper
from gatekeeper.build.errors import first_error
from gatekeeper.build.sources import extract

pytestmark = pytest.mark.slow  # compiles extensions and runs the build stage

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"

SUB = '''import torch
from torch.utils.cpp_extension import load_inline

HEADER = "#include <vector>\\n"
BODY = r"""
torch::Tensor f(torch::Tensor x) {
    int y = 1;
    return x.bogus();
}
"""

ext = load_inline(name="m", cpp_sources=HEADER + BODY, functions=["f"], extra_cflags=["-O2"])
'''


def test_cache_key_depends_on_sources_and_flags_only():
    base = extract(SUB.encode(), "sub.py")
    assert base is not None and base.compiles and not base.needs_cuda
    same = extract((SUB + "\n# a comment elsewhere\nX = 1\n").encode(), "sub.py")
    flags = extract(SUB.replace("-O2", "-O3").encode(), "sub.py")
    body = extract(SUB.replace("int y = 1;", "int y = 2;").encode(), "sub.py")
    assert base.cache_key() == same.cache_key()
    assert base.cache_key() != flags.cache_key() and base.cache_key() != body.cache_key()


def test_compiler_error_maps_to_python_line():
    extracted = extract(SUB.encode(), "sub.py")
    # main.cpp = 1 include line + HEADER (1 line) + BODY; `x.bogus()` is main.cpp line 6.
    output = ("In file included from x.h:1,\n/tmp/ext/m/main.cpp:6:14: error: 'class at::Tensor' has no member "
              "named 'bogus'\n    6 |     return x.bogus();\n/tmp/ext/m/main.cpp:9:1: error: later\n")
    error = first_error(output, extracted)
    assert error is not None and error.file == "main.cpp" and error.line == 6
    assert "bogus" in error.message and "x.bogus()" in error.source_line
    assert SUB.splitlines()[error.python_line - 1].strip() == "return x.bogus();"


def test_nvcc_error_form_maps_to_python_line():
    """nvcc writes `cuda.cu(51): error: ...` (2026-12-07, H100, CUDA 13): the message must name
    the error, not the tail of the ninja log."""
    path = FIXTURES / "submissions" / "r10_cpp_adl_mm_twin.py"
    text = path.read_text()
    extracted = extract(text.encode(), str(path))
    wanted = next(i for i, line in enumerate(text.splitlines(), 1) if "auto C = k::mm(A, B);" in line)
    cuda_line = 3 + next(i for i, line in enumerate(extracted.sources[-1].text.splitlines(), 1)
                         if "auto C = k::mm(A, B);" in line)
    output = (f"[1/3] nvcc ... -c /root/ext/m/cuda.cu -o cuda.cuda.o\nFAILED: cuda.cuda.o\n"
              f"/root/ext/m/cuda.cu({cuda_line}): error: more than one instance of function \"k::mm\" matches\n"
              "      auto C = mm(A, B);\n               ^\n\n1 error detected in the compilation of \"cuda.cu\".\n")
    error = first_error(output, extracted)
    assert error is not None and error.file == "cuda.cu" and error.line == cuda_line
    assert error.message.startswith("more than one instance") and error.python_line == wanted


def test_plain_python_has_nothing_to_compile():
    extracted = extract(b"import torch\nclass ModelNew(torch.nn.Module):\n    pass\n", "s.py")
    assert extracted is not None and not extracted.compiles


def test_cuda_submission_on_a_machine_without_gpu_is_an_error_not_a_reject(monkeypatch):
    monkeypatch.setenv("GATEKEEPER_ASSUME_CUDA", "0")
    report = gatekeeper.check(FIXTURES / "submissions" / "seed_honest_generic.py",
                              FIXTURES / "problems" / "seed_mean.py", stages="behaviour")
    assert report.verdict.value == "error" and report.exit_code == 3
    build = next(s for s in report.stages if s.name.value == "build")
    assert build.status.value == "error" and "needs a CUDA device" in build.reason


def test_stale_torch_build_lock_left_by_a_killed_worker_does_not_hang_the_next_check():
    from gatekeeper.build.cache import extensions_dir

    submission = FIXTURES / "submissions" / "cpu_honest_cpp.py"
    problem = FIXTURES / "problems" / "cpu_mean.py"
    first = gatekeeper.check(submission, problem, stages="build")  # compiles once, or hits the cache
    assert first.verdict.value == "pass"
    key = extract(submission.read_bytes(), str(submission)).cache_key()
    folders = [p for p in extensions_dir(key).iterdir() if p.is_dir()]
    assert folders
    (folders[0] / "lock").write_text("")  # what torch's FileBaton leaves when its holder is killed
    report = gatekeeper.check(submission, problem, stages="behaviour")
    assert report.verdict.value == "pass", [f.message for f in report.findings]
    assert not (folders[0] / "lock").exists()


def test_compile_error_is_mapped_to_the_python_line_and_cached():
    submission = FIXTURES / "submissions" / "cpu_compile_error_cpp.py"
    problem = FIXTURES / "problems" / "cpu_mean.py"
    wanted = next(i for i, line in enumerate(submission.read_text().splitlines(), 1) if "undefined_method_here" in line)
    for attempt in range(2):  # the second answer comes from the cache, without compiling
        report = gatekeeper.check(submission, problem, stages="build", keep_going=True)
        failures = [f for f in report.findings if f.rule == "GK680"]
        assert len(failures) == 1 and failures[0].location.line == wanted
        assert "undefined_method_here" in failures[0].message
    assert failures[0].evidence.get("cached") is True


def test_a_toolchain_that_cannot_build_anything_is_an_infrastructure_error_not_a_reject(monkeypatch, tmp_path):
    """The compiler is missing (as when the sandbox cannot see a GCC under /opt): the
    submission's compile fails, and so does a trivial probe extension, so it is exit 3."""
    monkeypatch.setenv("GATEKEEPER_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("CXX", str(tmp_path / "no-such-compiler"))
    submission = tmp_path / "broken.py"
    submission.write_text(SUB + "\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return ext.f(x)\n")
    report = gatekeeper.check(submission, FIXTURES / "problems" / "cpu_mean.py", stages="build", keep_going=True)
    build = next(s for s in report.stages if s.name.value == "build")
    assert build.status.value == "error" and report.exit_code == 3
    assert "cannot build even a trivial C++ extension" in build.reason
    assert not [f for f in report.findings if f.rule == "GK680"]


def _importing(tmp_path, module: str):
    """The honest CPU extension for cpu_seed_mean, importing `module` first."""
    honest = (FIXTURES / "submissions" / "cpu_honest_cpp.py").read_text()
    sub = tmp_path / "sub.py"
    sub.write_text(f"import {module}\n" + honest)
    return gatekeeper.check(sub, FIXTURES / "problems" / "cpu_seed_mean.py", stages="behaviour")


def test_a_gpu_package_this_machine_lacks_is_an_error_not_a_reject(tmp_path):
    # Round 9: every Triton submission was rejected (GK660) on a machine without triton.
    # thunderkittens stands for any GPU programming package missing here (triton too, where absent).
    report = _importing(tmp_path, "thunderkittens")
    assert report.verdict.value == "error" and report.exit_code == 3, report.findings
    stage = next(s for s in report.stages if s.status.value == "error")
    assert "needs the `thunderkittens` package" in stage.reason


def test_a_module_missing_everywhere_is_the_submissions_error(tmp_path):
    report = _importing(tmp_path, "gk_no_such_module_anywhere")
    assert report.verdict.value == "reject" and any(f.rule == "GK660" for f in report.errors())
