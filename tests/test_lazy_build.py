"""A compile the submission starts lazily (in `__init__` or on its first `forward`) runs under
the build limit, not the init/call limit (gatekeeper/runtime/build_phase.py). Real compiles in
the real sandbox, with init/call limits far shorter than any cold C++ compile."""

from __future__ import annotations

import ast

from pathlib import Path

import pytest

import gatekeeper
from gatekeeper.config import Config, LimitSettings

pytestmark = pytest.mark.slow

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
# The honest mean kernel of fixtures/submissions/cpu_honest_cpp.py, compiled lazily here.
SOURCE = ast.literal_eval(next(node.value for node in ast.parse(
    (FIXTURES / "submissions" / "cpu_honest_cpp.py").read_text()).body
    if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "_cpp_src"))
INIT = '''
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.ext = load_inline(name="NAME", cpp_sources=SOURCE, functions=["mean_dim0"], verbose=False)

    def forward(self, x):
        return self.ext.mean_dim0(x)
'''
FIRST_CALL = '''
_ext = []


class ModelNew(nn.Module):
    def forward(self, x):
        if not _ext:  # built on the first call, then kept
            _ext.append(load_inline(name="NAME", cpp_sources=SOURCE, functions=["mean_dim0"], verbose=False))
        return _ext[0].mean_dim0(x)
'''
# A cold compile takes 8-25 s of CPU here: these limits are shorter than any of them.
SHORT = LimitSettings(import_timeout_s=8.0, call_timeout_s=8.0)


@pytest.mark.parametrize("where, body", [("init", INIT), ("first_call", FIRST_CALL)])
def test_a_lazy_compile_is_limited_as_a_build_not_as_the_call(tmp_path: Path, monkeypatch, where: str,
                                                               body: str) -> None:
    monkeypatch.setenv("GATEKEEPER_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("GATEKEEPER_PRECOMPILED_HEADER", "0")  # the slowest compile: the case at issue
    name = f"gk_lazy_{where}_{tmp_path.name[-8:]}".replace("-", "_")
    path = tmp_path / "solution.py"
    path.write_text("import torch\nimport torch.nn as nn\nfrom torch.utils.cpp_extension import load_inline\n\n"
                    f"SOURCE = r'''{SOURCE}'''\n" + body.replace("NAME", name), "utf-8")
    report = gatekeeper.check(path, FIXTURES / "problems" / "cpu_mean.py", stages="behaviour",
                              config=Config(limits=SHORT, ignore=["GK667"]))
    behaviour = next(s for s in report.stages if s.name.value == "behaviour")
    assert [f.rule for f in report.findings if f.rule == "GK661"] == [], [f.message for f in report.findings]
    assert behaviour.status.value == "passed", (behaviour.reason, [f.message for f in report.findings])


def test_a_lazy_compile_that_never_ends_is_still_a_time_out(tmp_path: Path, monkeypatch) -> None:
    # The build limit bounds a lazy compile as it bounds a module-level one: the source includes
    # a FIFO nobody writes, so the compiler blocks (as fixtures/hostile/build_never_ends.py).
    monkeypatch.setenv("GATEKEEPER_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "solution.py"
    path.write_text("import os, tempfile\nimport torch\nimport torch.nn as nn\n"
                    "from torch.utils.cpp_extension import load_inline\n\n"
                    "_fifo = os.path.join(tempfile.gettempdir(), 'gk_lazy_fifo')\n"
                    "if not os.path.exists(_fifo):\n    os.mkfifo(_fifo)\n"
                    f"SOURCE = f'#include \"{{_fifo}}\"\\n' + r'''{SOURCE}'''\n"
                    + FIRST_CALL.replace("NAME", "gk_lazy_never"), "utf-8")
    limits = LimitSettings(import_timeout_s=8.0, call_timeout_s=8.0, build_timeout_s=15.0)
    report = gatekeeper.check(path, FIXTURES / "problems" / "cpu_mean.py", stages="behaviour",
                              config=Config(limits=limits, ignore=["GK667"]))
    timeouts = [f for f in report.findings if f.rule == "GK661"]
    assert timeouts and "phase 'build'" in timeouts[0].message, [f.message for f in report.findings]
