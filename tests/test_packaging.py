"""The layout as installed: the wheel carries the top-level rule pack as `gatekeeper_rules`
and every package folder; rule modules are imported once; rules import no other rule."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # builds and installs a wheel

ROOT = Path(__file__).resolve().parent.parent


def test_every_package_folder_is_listed_in_pyproject():
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["tool"]["setuptools"]["packages"])
    on_disk = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "gatekeeper").rglob("__init__.py")}
    assert on_disk | {"gatekeeper_rules"} == listed


def test_rules_folder_holds_only_rules_and_rules_import_no_rule():
    for path in sorted((ROOT / "rules").glob("*.py")):
        if path.name == "__init__.py":
            continue
        assert re.fullmatch(r"gk\d{3}_[a-z0-9_]+\.py", path.name), f"{path.name} is not a rule file"
        text = path.read_text("utf-8")
        assert "class " in text and "code = " in text, f"{path.name} defines no rule"
        assert not re.search(r"(gatekeeper_rules|gatekeeper\.rules)\.", text), f"{path.name} imports a rule"


def test_no_module_is_loaded_twice_after_discovery():
    code = ("import sys, collections\n"
            "from gatekeeper.static.discovery import discover_rules\n"
            "discover_rules()\n"
            "files = collections.Counter(getattr(m, '__file__', None) for m in list(sys.modules.values()))\n"
            "print([f for f, n in files.items() if f and n > 1 and ('gatekeeper' in f or '/rules/' in f)])\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "[]"


def test_an_installed_wheel_lists_and_explains_every_code(tmp_path):
    wheel_dir, target = tmp_path / "wheel", tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                    "-w", str(wheel_dir), str(ROOT)], check=True, timeout=300, capture_output=True)
    wheel = next(wheel_dir.glob("kernel_gatekeeper-*.whl"))  # the distribution name (issue 21)
    with zipfile.ZipFile(wheel) as archive:  # PEP 561: type checkers use gatekeeper's annotations
        assert "gatekeeper/py.typed" in archive.namelist()
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target),
                    str(wheel)], check=True, timeout=300, capture_output=True)
    assert (target / "gatekeeper_rules" / "gk101_returns_persistent_tensor.py").is_file()
    assert (target / "gatekeeper" / "analyses" / "torch_policy.toml").is_file()
    assert (target / "gatekeeper" / "py.typed").is_file()
    # Run from outside the source tree, with the installed copy first on the path.
    env = {**os.environ, "PYTHONPATH": str(target)}
    code = ("import gatekeeper, gatekeeper_rules\n"
            "from gatekeeper.catalogue import catalogue\n"
            "print(gatekeeper.__file__); print(gatekeeper_rules.__file__)\n"
            "print(len(catalogue()))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         cwd=tmp_path, env=env, check=True).stdout.split()
    assert out[0].startswith(str(target)) and out[1].startswith(str(target))
    editable = subprocess.run([sys.executable, "-c", "from gatekeeper.catalogue import catalogue; print(len(catalogue()))"],
                              capture_output=True, text=True, timeout=120, cwd=ROOT, check=True).stdout.split()
    assert int(out[2]) == int(editable[0]) > 100
    explained = subprocess.run([sys.executable, "-m", "gatekeeper", "explain", "GK101"], capture_output=True,
                               text=True, timeout=120, cwd=tmp_path, env=env)
    assert explained.returncode == 0 and "ReturnsPersistentTensor" in explained.stdout
