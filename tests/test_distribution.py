"""The distribution is kernel-gatekeeper (`gatekeeper` on PyPI is an unrelated project):
pyproject, the installed metadata and every install hint in code and docs agree, and the
project's URLs are declared. Reads the real files and the installed metadata."""

from __future__ import annotations

import re
import tomllib
from importlib import metadata
from pathlib import Path

from gatekeeper.distribution import DISTRIBUTION, pip_install

ROOT = Path(__file__).resolve().parent.parent
# `pip install gatekeeper`, `pip install 'gatekeeper[ray]'`, "gatekeeper[agent]"...: the wrong package.
WRONG = re.compile(r"""pip install\s+['"]?gatekeeper\b(?!-)|(?<![\w-])['"]gatekeeper\[""")


def test_pyproject_names_the_distribution_and_its_urls():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]
    assert project["name"] == DISTRIBUTION == "kernel-gatekeeper"
    assert project["scripts"]["gatekeeper"] == "gatekeeper.cli:main"  # the command keeps its name
    urls = project["urls"]
    assert {"Homepage", "Repository", "Issues", "Documentation"} <= set(urls)
    assert all(u.startswith("https://") for u in urls.values())


def test_installed_metadata_is_under_the_new_name():
    assert metadata.version(DISTRIBUTION)
    assert any(url.startswith("Repository, https://") for url in metadata.metadata(DISTRIBUTION).get_all("Project-URL"))


def test_no_install_hint_names_the_wrong_package():
    strays = []
    for path in [*ROOT.glob("*.md"), *(ROOT / "docs").rglob("*.md"), *(ROOT / "gatekeeper").rglob("*.py"),
                 *(ROOT / "examples").rglob("*"), ROOT / ".pre-commit-hooks.yaml"]:
        if not path.is_file():
            continue
        for number, line in enumerate(path.read_text("utf-8", errors="replace").splitlines(), 1):
            if WRONG.search(line) and "unrelated" not in line:  # the lines that warn against it may name it
                strays.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not strays, "install hints that name the unrelated `gatekeeper` package:\n" + "\n".join(strays)


def test_hints_are_built_from_one_name():
    assert pip_install() == "pip install kernel-gatekeeper"
    assert pip_install("ray") == "pip install 'kernel-gatekeeper[ray]'"
    assert WRONG.search("pip install 'gatekeeper[ray]'") and WRONG.search("pip install gatekeeper")
    assert not WRONG.search(pip_install("ray")) and not WRONG.search(pip_install())
