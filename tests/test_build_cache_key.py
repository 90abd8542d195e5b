"""The build cache key names everything torch's own extension hash depends on, so a build
marked done in one environment is never taken for another (where torch would rebuild it
inside the submission's import phase, under the import time limit)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from gatekeeper.build.sources import extract

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
SUB = FIXTURES / "submissions" / "cpu_honest_cpp.py"


def _key() -> str:
    extracted = extract(SUB.read_bytes(), str(SUB))
    assert extracted is not None and extracted.compiles
    return extracted.cache_key()


def test_key_is_stable_for_one_environment():
    assert _key() == _key()


def test_key_changes_with_the_compiler(monkeypatch):
    before = _key()
    monkeypatch.setenv("CXX", "clang++")
    assert _key() != before


def test_key_changes_with_the_torch_install(tmp_path):
    # Another torch on the path (another virtualenv's, a CI clone's): its include paths are
    # part of torch's own build hash, so the build must not be shared.
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text("")
    code = ("from pathlib import Path; from gatekeeper.build.sources import extract; "
            f"print(extract(Path({str(SUB)!r}).read_bytes(), {str(SUB)!r}).cache_key())")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert other.stdout.strip() and other.stdout.strip() != _key()
