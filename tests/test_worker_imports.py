"""A submission worker imports only what it uses (issue 21 item 12: every worker pays for its
imports, and the suite starts hundreds). Real interpreters, real torch: the worker's modules
are imported as worker.py imports them (a bare `gatekeeper` package, no API)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # interpreters that import torch

ROOT = Path(__file__).resolve().parent.parent

PRELUDE = f"""
import json, sys, types
package = types.ModuleType("gatekeeper")
package.__path__ = [{str(ROOT / "gatekeeper")!r}]
sys.modules["gatekeeper"] = package

class Channel:
    current_phase, current_data, said = "import", {{}}, []
    def phase(self, name, **data):
        self.said.append(name)
        self.current_phase, self.current_data = name, data
"""


def _run(body: str) -> dict:
    done = subprocess.run([sys.executable, "-c", PRELUDE + body], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_harness_loads_neither_the_report_schema_nor_the_compiler_front_end():
    seen = _run("""
from gatekeeper.sandbox.prelude import load_harness
from gatekeeper.runtime.build_phase import announce_builds
load_harness()
import gatekeeper.behaviour.executing
announce_builds(Channel())
print(json.dumps({m: m in sys.modules for m in ("pydantic", "gatekeeper.report", "libcst",
                                                  "setuptools", "torch.utils.cpp_extension")}))
""")
    assert seen == {"pydantic": False, "gatekeeper.report": False, "libcst": False, "setuptools": False,
                    "torch.utils.cpp_extension": False}, seen


def test_a_compile_entry_imported_later_is_still_announced_as_the_build_phase():
    # The submission imports load_inline after the worker is set up: the module it gets has
    # the wrapped entry, and a call to it runs in the build phase, then the interrupted one.
    seen = _run("""
from gatekeeper.runtime.build_phase import announce_builds
channel = Channel()
announce_builds(channel)
announce_builds(channel)  # twice: one finder
from torch.utils.cpp_extension import load_inline
import torch.utils.cpp_extension as ext
wrapped = getattr(ext._jit_compile, "_gk_build_phase", False)
reached = load_inline.__globals__["_jit_compile"] is ext._jit_compile  # what load_inline calls
try:
    ext._jit_compile()  # no arguments: torch's entry fails at once, after the phase is announced
except TypeError:
    pass
finders = sum(type(f).__name__ == "_WrapOnImport" for f in sys.meta_path)
print(json.dumps({"wrapped": wrapped, "reached": reached, "phases": channel.said, "finders": finders}))
""")
    assert seen["wrapped"] is True and seen["reached"] is True and seen["finders"] == 1, seen
    assert seen["phases"] == ["build", "import"], seen


def test_a_compile_entry_loaded_before_is_wrapped_at_once():
    seen = _run("""
import torch.utils.cpp_extension as ext
from gatekeeper.runtime.build_phase import announce_builds
announce_builds(Channel())
print(json.dumps({"wrapped": getattr(ext._jit_compile, "_gk_build_phase", False),
                  "finders": sum(type(f).__name__ == "_WrapOnImport" for f in sys.meta_path)}))
""")
    assert seen == {"wrapped": True, "finders": 0}, seen
