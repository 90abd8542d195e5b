"""A submission is its file and the local modules it imports: `solution.py` with a
`kernels.py` or a `csrc/` package beside it is checked as one submission (issue 20 item 7).

The C++/CUDA sources a submission hands to `load(sources=[...])` are already read by the
C++ extraction (static/cpp_sources.py, side files beside the submission). What this module
adds is the Python side: every module the submission imports that resolves to a file in its
own folder (`import kernels`, `from kernels import f`, `from . import kernels`,
`importlib.import_module("kernels")`), followed transitively, is checked with the same rules,
and its findings point into that file. A hack moved into a helper module is then seen where
it is, and the report lists every file that was checked with the submission.

Resolution is by file name only, like Python's own import of a script's folder: a module
that also names an installed package (a local `torch.py`) is local too, because that is what
the interpreter would import, and it is checked.
"""

from __future__ import annotations

import ast
import os
import re
import time
from collections import deque
from functools import lru_cache
from pathlib import Path
from typing import Optional

MAX_MODULES = 32  # a submission with more local modules than this is checked up to the limit
MAX_BYTES = 2_000_000


def _imported_names(text: str) -> list[tuple[str, int]]:
    """(dotted name, relative level) of every import in the module, at any depth (imports
    inside functions and `try` blocks count: a lazy import runs too)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    out: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(alias.name, 0) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if base:
                out.append((base, node.level))
            # `from . import kernels` and `from pkg import kernels`: the names may be modules
            out += [(f"{base}.{alias.name}" if base else alias.name, node.level) for alias in node.names]
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if name in ("import_module", "__import__"):
                out.append((node.args[0].value, 0))
        if isinstance(node, ast.Call) and len(node.args) >= 2:
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if name in _BY_PATH:  # spec_from_file_location("k", os.path.join(..., "kernels.py"))
                out += [(n.value, _FILE) for n in ast.walk(node.args[1])
                        if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value.endswith(".py")]
    return out


_BY_PATH = frozenset({"spec_from_file_location", "SourceFileLoader"})
_FILE = -1  # the "level" of a file loaded by its path beside the importing file, not by a module name


def _resolve(name: str, level: int, here: Path, root: Path) -> Optional[Path]:
    """The file inside `root` that `import name` (at `level`) from a file in `here` loads."""
    if level == _FILE:  # a path beside the importing file, any depth below it inside root
        try:
            resolved = (here / name).resolve()
        except OSError:
            return None
        return resolved if resolved.is_file() and root in resolved.parents else None
    base = here if level else root
    for _ in range(max(level - 1, 0)):
        base = base.parent
    parts = [p for p in name.split(".") if p]
    if not parts:
        return None
    target = base.joinpath(*parts)
    for candidate in (target.with_suffix(".py"), target / "__init__.py"):
        try:
            resolved = candidate.resolve()
        except OSError:
            continue
        if resolved.is_file() and (resolved.parent == root or root in resolved.parents):
            return resolved
    return None


_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _importable_names(root: Path) -> tuple[frozenset[str], frozenset[str]]:
    """The names an import resolving inside `root` must spell: (its entries (`k` of k.py,
    folders); those and the parts of its own path, which only a relative import reaches:
    `from .. import <root's name>`). Cached by the
    folder's mtime, which changes when an entry is added, removed or renamed, once that
    mtime is 2 s old (a coarse-grained file system may not tick for a fresh change)."""
    stamp = root.stat().st_mtime_ns
    if time.time_ns() - stamp < 2_000_000_000:
        return _scan_names.__wrapped__(root, stamp)
    return _scan_names(root, stamp)


@lru_cache(maxsize=256)
def _scan_names(root: Path, mtime_ns: int) -> tuple[frozenset[str], frozenset[str]]:
    entries = [e.name[:-3] if e.name.endswith(".py") else e.name for e in os.scandir(root)]  # OSError: the caller walks
    # lower case: on a case-insensitive file system `import Kernels` loads kernels.py
    own = frozenset(n.lower() for n in entries)
    return own, own | frozenset(p.lower() for p in root.parts)


# `from` then dots: the only spelling of a relative import without a string (`from . import k`,
# `from ..pkg import k`, `from \<newline> . import k`). An absolute import resolves from `root`
# itself, so its first part must be an entry of `root`; only a relative one climbs above it.
_RELATIVE = re.compile(r"from[\s\\]*\.")


def _may_import_local(text: str, root: Path) -> bool:
    """False only when no import in `text` can resolve inside `root`: a resolving dotted name
    has a part that is an entry of `root` (or, in a relative import, a part of its path), and
    the text spells it as an identifier. Non-ASCII text (identifiers are NFKC-normalised) and the dynamic forms
    (a string constant may hold escapes) always take the full walk."""
    if not text.isascii() or "import_module" in text or "__import__" in text or "spec_from_file_location" in text \
            or "SourceFileLoader" in text:
        return True
    try:
        entries, with_parts = _importable_names(root)
    except OSError:
        return True
    # the folder's path parts (`tmp`, `src`, `work`: common words) only with a relative import
    spelled = _spelled(with_parts if _RELATIVE.search(text) else entries)
    if spelled is None:
        return False
    lowered = text.lower()
    # Equivalent to `names & set(_IDENTIFIER.findall(lowered))` without listing every identifier
    # of the text (1-2% of a batch): a name must first occur as a substring (issue 20 item 8).
    if not any(name in lowered for name in spelled):
        return False
    return _identifier_pattern(spelled).search(lowered) is not None


@lru_cache(maxsize=256)
def _spelled(names: frozenset[str]) -> Optional[tuple[str, ...]]:
    """The names an identifier of lowered ASCII text can equal. None: no name can be an
    identifier (an entry `a-b.txt`, the path part `/`)."""
    usable = tuple(sorted(n for n in names if _LOWER_IDENTIFIER.fullmatch(n)))
    return usable or None


@lru_cache(maxsize=256)
def _identifier_pattern(usable: tuple[str, ...]) -> re.Pattern[str]:
    """A pattern that finds one of `usable` exactly where `_IDENTIFIER.findall` would list
    it: not inside a longer identifier, where a run of digits before it is skipped (`2tmp`
    lists `tmp`, `a2tmp` does not). Compiled only for a folder one of whose names occurs in
    a text as a substring: compiling one for every folder was ~1% of the bench's 1,000-file
    run over 351 folders, where no text needed one (issue 20 item 8)."""
    alternatives = "|".join(re.escape(n) for n in sorted(usable, key=len, reverse=True))
    return re.compile(rf"(?<![a-z0-9_])[0-9]*(?:{alternatives})(?![a-z0-9_])")


_LOWER_IDENTIFIER = re.compile(r"[a-z_][a-z0-9_]*")


def local_modules(text: str, path: str) -> list[Path]:
    """The submission's own Python modules beside it, in the order they are first imported;
    the submission itself is not listed. Empty for a submission checked from memory."""
    if not path or path == "<submission>" or not Path(path).is_file():
        return []
    # The screen reads the folder's entries, and its path parts only for a relative import. A
    # file that is not a link sits in the very folder its resolved path names, so without a
    # relative import the unresolved folder screens the same, and resolving (a system call per
    # path part) is left to the few files that pass (issue 20 item 8).
    # (Absolute, so that the folder's cached entries never answer for another working folder.)
    if not _RELATIVE.search(text) and not Path(path).is_symlink() \
            and not _may_import_local(text, Path(os.path.abspath(path)).parent):
        return []
    main = Path(path).resolve()
    root = main.parent
    if not _may_import_local(text, root):
        return []  # most submissions: a screen on the text spares a second parse (issue 20 item 8)
    seen = {main}
    found: list[Path] = []
    queue: deque[tuple[Path, str]] = deque([(main, text)])
    while queue and len(found) < MAX_MODULES:
        current, source = queue.popleft()
        for name, level in _imported_names(source):
            module = _resolve(name, level, current.parent, root)
            if module is None or module in seen:
                continue
            seen.add(module)
            try:
                if module.stat().st_size > MAX_BYTES:
                    found.append(module)  # listed; the static stage reports it as too large
                    continue
                found.append(module)
                queue.append((module, module.read_text("utf-8", errors="replace")))
            except OSError:
                continue
            if len(found) >= MAX_MODULES:
                break
    return found
