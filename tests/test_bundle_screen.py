"""The text screen in front of the import walk (gatekeeper/submission_files.py, issue 20
item 8) only skips submissions whose imports cannot resolve beside them: for every
spelling below, local_modules finds the same modules as the full walk."""

from __future__ import annotations

from pathlib import Path

import pytest

from gatekeeper import submission_files
from gatekeeper.submission_files import local_modules

SPELLINGS = [
    ("import kernels\n", ["kernels.py"]),
    ("from kernels import f\n", ["kernels.py"]),
    ("from . import kernels\n", ["kernels.py"]),
    ("from pkg.c import f\n", ["pkg/c.py"]),
    ("def f():\n    import kernels\n", ["kernels.py"]),
    ("import importlib\nm = importlib.import_module('k\\x65rnels')\n", ["kernels.py"]),  # escaped name
    ("m = __import__('ker' 'nels')\n", ["kernels.py"]),  # implicit concatenation
    ("from .. import {root}\n", ["__init__.py"]),  # the submission's own package, from above
    ("import torch\nimport os\n# kernels, only in a comment\n", []),
    ("x = 1\n", []),
]


@pytest.mark.parametrize("text,expected", SPELLINGS)
def test_the_screen_never_hides_an_import_the_walk_follows(tmp_path, text, expected, monkeypatch):
    root = tmp_path / "subm"
    for name in ("kernels.py", "pkg/__init__.py", "pkg/c.py", "__init__.py", "other_submission.py"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("")
    main = root / "solution.py"
    main.write_text(text.format(root=root.name))
    screened = local_modules(main.read_text(), str(main))
    monkeypatch.setattr(submission_files, "_may_import_local", lambda text, root: True)  # the full walk
    walked = local_modules(main.read_text(), str(main))
    assert screened == walked
    assert sorted(p.relative_to(root).as_posix() for p in walked) == sorted(expected)


def test_a_module_added_after_a_first_check_is_seen(tmp_path):
    main = tmp_path / "solution.py"
    main.write_text("import helper\n")
    assert local_modules(main.read_text(), str(main)) == []
    (tmp_path / "helper.py").write_text("")  # the folder's mtime changes: the cached names are stale
    assert [p.name for p in local_modules(main.read_text(), str(main))] == ["helper.py"]


@pytest.mark.parametrize("text", ["import kernels\n", "from . import kernels\n", "x = 1\n"])
def test_a_linked_submission_is_screened_where_its_target_lies(tmp_path, text, monkeypatch):
    """The screen may read the unresolved folder only for a file that is not a link: a link's
    modules are the ones beside its target (issue 20 item 8, fifth pass)."""
    target_dir, link_dir = tmp_path / "real", tmp_path / "links"
    target_dir.mkdir()
    link_dir.mkdir()
    (target_dir / "kernels.py").write_text("")
    (target_dir / "solution.py").write_text(text)
    link = link_dir / "solution.py"
    link.symlink_to(target_dir / "solution.py")
    screened = local_modules(text, str(link))
    monkeypatch.setattr(submission_files, "_may_import_local", lambda text, root: True)
    walked = local_modules(text, str(link))
    assert screened == walked
    assert [p.name for p in walked] == ([] if text == "x = 1\n" else ["kernels.py"])


def test_a_relative_path_is_screened_from_its_own_folder(tmp_path, monkeypatch):
    """A relative path names a folder under the working folder; the screen's cache must not
    answer for another working folder with the same relative path."""
    for name, helper in (("one", True), ("two", False)):
        folder = tmp_path / name / "sub"
        folder.mkdir(parents=True)
        (folder / "solution.py").write_text("import helper\n")
        if helper:
            (folder / "helper.py").write_text("")
    found = []
    for name in ("one", "two"):
        monkeypatch.chdir(tmp_path / name)
        found.append([p.name for p in local_modules("import helper\n", "sub/solution.py")])
    assert found == [["helper.py"], []]
