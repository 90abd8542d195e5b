"""The import screen (gatekeeper/submission_files.py, issue 20 item 8). Its substring-and-
pattern form answers exactly what listing every identifier of the text answered: the old
form is kept here as the oracle and both are run on fuzzed texts and name sets, and on the
corpus. The folder's path parts count only in a text with a relative import: on fuzzed
import statements in a real folder tree, the screened walk finds what the full walk finds."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from gatekeeper import submission_files

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus"


def oracle(text: str, names: frozenset[str]) -> bool:
    """The screen before: some identifier of the lowered text is one of the names."""
    return not names.isdisjoint(_IDENT.findall(text.lower()))


def screen(text: str, names: frozenset[str], monkeypatch) -> bool:
    # the same names as entries and as path parts: this part checks how names are spelled
    monkeypatch.setattr(submission_files, "_importable_names", lambda root: (names, names))
    return submission_files._may_import_local(text, Path("/nowhere"))


# Pieces chosen to sit a name against every boundary the identifier scan has: digits before
# it (`2tmp` lists `tmp`), letters or `_` before or after it, dots, a name inside a longer one.
PIECES = ["tmp", "sub", "kernels", "k2", "_x", "2", "09", "a", "_", ".", " ", "\n", "(", "Tmp", "SUB",
          "level1", "x_tmp", "tmp_", "1tmp", "a1tmp", "subtract", "-", "/", "'", "#"]
NAME_POOL = ["tmp", "sub", "kernels", "k2", "_x", "level1", "a", "/", "a-b.txt", "x.y", "", "9lives"]


def test_the_fast_screen_equals_the_identifier_listing_on_fuzzed_texts(monkeypatch):
    rng = random.Random(20)
    for _ in range(4000):
        text = "".join(rng.choice(PIECES) for _ in range(rng.randint(0, 12)))
        names = frozenset(rng.sample(NAME_POOL, rng.randint(0, 5)))
        assert screen(text, names, monkeypatch) == oracle(text, names), (text, names)


@pytest.mark.parametrize("text,names,expected", [
    ("x = 2tmp", {"tmp"}, True),  # a digit run is skipped, then `tmp` is an identifier
    ("a2tmp = 1", {"tmp"}, False),  # inside a longer identifier
    ("subtract(x)", {"sub"}, False),
    ("from sub import f", {"sub"}, True),
    ("import Kernels", {"kernels"}, True),  # lowered, as a case-insensitive file system loads it
    ("a / b", {"/"}, False),  # a path part that no identifier can spell
])
def test_boundaries(text, names, expected, monkeypatch):
    assert screen(text, frozenset(names), monkeypatch) is expected is oracle(text, frozenset(names))


@pytest.mark.skipif(not CORPUS.is_dir(), reason="needs ../shared/corpus")
def test_the_fast_screen_equals_the_identifier_listing_on_corpus_files(monkeypatch):
    names = frozenset({"tmp", "sub", "work", "main", "level1", "level2", "kernels", "utils", "model", "f0001"})
    files = sorted(CORPUS.rglob("*.py"))[::7]
    assert files
    for path in files:
        text = path.read_text("utf-8", errors="replace")
        if text.isascii() and "import_module" not in text and "__import__" not in text:
            assert screen(text, names, monkeypatch) == oracle(text, names), path


STATEMENTS = ["import kernels", "from . import kernels", "from .. import subm", "from ..subm import kernels",
              "from ..subm.pkg import c", "from . pkg import c", "from \\\n  .kernels import f", "from.pkg.c import f",
              "import pkg.c", "from pkg import c", "import outer.subm.kernels", "import subm", "subm = outer = 1",
              "import torch", "x = kernels_like", "def f():\n    from .. import subm"]


def test_path_parts_count_only_with_a_relative_import(tmp_path, monkeypatch):
    root = tmp_path / "outer" / "subm"
    for name in ("kernels.py", "pkg/__init__.py", "pkg/c.py", "__init__.py", "../__init__.py"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("")
    main = root / "solution.py"
    rng = random.Random(8)
    cases = [[s] for s in STATEMENTS] + [rng.sample(STATEMENTS, rng.randint(1, 4)) for _ in range(150)]
    full = submission_files._may_import_local
    for statements in cases:
        text = "\n".join(statements) + "\n"
        main.write_text(text)
        monkeypatch.setattr(submission_files, "_may_import_local", full)
        screened = submission_files.local_modules(text, str(main))
        monkeypatch.setattr(submission_files, "_may_import_local", lambda text, root: True)
        assert screened == submission_files.local_modules(text, str(main)), statements
    # the folder's own name, spelled with no relative import: nothing to walk
    assert not full("subm = outer = 1\nimport torch\n", root.resolve())
    assert full("from .. import subm\n", root.resolve())
