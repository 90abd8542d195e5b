"""Which files `gatekeeper check PATH...` checks, the way ruff finds them (issue 21, item 5).

- A file named on the command line is always checked, whatever the excludes say.
- A folder is walked for `*.py` files, skipping:
  - the default excludes (version-control folders, virtual environments, caches, build
    output), or the configuration's `exclude` in their place, plus its `extend-exclude`;
  - any folder that says what it is: a virtual environment (`pyvenv.cfg`), a conda
    environment (`conda-meta/`), a cache that carries a `CACHEDIR.TAG`, a pre-commit store;
  - what `.gitignore` ignores: asked of git itself inside a repository (`git check-ignore`),
    read by a small parser outside one or when git cannot answer.
  A folder named on the command line is walked even when it is itself excluded; what lies
  below it is still filtered.
- A file reached twice (named twice, or named and inside a named folder) is checked once.

Patterns: one without `/` matches a file or folder name at any depth (`build`, `*.egg-info`);
one with `/` matches the end of a path (`.cache/pre-commit`, `runs/old/*.py`).
"""

from __future__ import annotations

import fnmatch
import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Optional, Sequence

from gatekeeper.errors import UsageError
from gatekeeper.path_errors import not_found

DEFAULT_EXCLUDES: tuple[str, ...] = (
    ".git", ".hg", ".svn", ".bzr", ".jj",
    ".venv", "venv", ".direnv", "__pypackages__", "site-packages", ".eggs", "*.egg-info",
    "node_modules", "build", "dist", "_build", "buck-out",
    "__pycache__", ".tox", ".nox", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".pytype",
    ".ipynb_checkpoints", ".cache/pre-commit",
)

# pre-commit writes this README at the top of its store (pre_commit/store.py), wherever
# PRE_COMMIT_HOME puts it.
_PRE_COMMIT_README = "This directory is maintained by the pre-commit project."


@dataclass
class Discovery:
    files: list[Path]
    skipped: int = 0  # *.py files left out by the excludes or .gitignore
    reasons: set[str] = field(default_factory=set)
    # Paths under a walked folder that could not be read: (path, why). Skipping them silently
    # would pass a folder whose unread files were never checked, so discover() refuses the run.
    unreadable: list[tuple[str, str]] = field(default_factory=list)


def discover(paths: Sequence[Path], exclude: Optional[Sequence[str]] = None,
             extend_exclude: Sequence[str] = ()) -> Discovery:
    """The files to check, in the order given (a folder's files sorted), each once."""
    patterns = tuple(DEFAULT_EXCLUDES if exclude is None else exclude) + tuple(extend_exclude)
    found = Discovery(files=[])
    seen: set[str] = set()
    for path in paths:
        if path.is_dir():
            candidates = _walk(path, patterns, found)
        elif path.exists():
            candidates = [path]
        else:
            raise UsageError(f"no such file or folder: {path}" if not path.is_symlink() else not_found(path, "submission"))
        for file in candidates:
            key = os.path.realpath(file)
            if key not in seen:
                seen.add(key)
                found.files.append(file)
    if found.unreadable:
        raise UsageError(_unreadable_message(found.unreadable))
    if not found.files:
        where = ", ".join(str(p) for p in paths)
        if found.skipped:
            raise UsageError(
                f"no submissions found in {where}: its {found.skipped} *.py file(s) are all excluded "
                f"({', '.join(sorted(found.reasons))}); name a file to check it anyway, or change "
                "`exclude` / `extend-exclude` in the configuration")
        raise UsageError(f"no submissions found in {where} (looked for *.py files)")
    return found


def excluded_by(rel_parts: Sequence[str], patterns: Iterable[str]) -> Optional[str]:
    """The pattern that excludes the path (its parts relative to the walked folder), if any."""
    rel = "/".join(rel_parts)
    for pattern in patterns:
        pattern = pattern.strip("/")
        if "/" in pattern:
            if fnmatch.fnmatchcase(rel, pattern) or fnmatch.fnmatchcase(rel, "*/" + pattern):
                return pattern
        elif fnmatch.fnmatchcase(rel_parts[-1], pattern):
            return pattern
    return None


def _marked(folder: str, names: list[str], files: list[str]) -> Optional[str]:
    """What a folder says it is, by the files it holds: never a place for submissions."""
    if "pyvenv.cfg" in files:
        return "a virtual environment (pyvenv.cfg)"
    if "conda-meta" in names:
        return "a conda environment (conda-meta/)"
    if "CACHEDIR.TAG" in files:
        return "a cache (CACHEDIR.TAG)"
    if "db.db" in files and "README" in files:
        try:
            with open(os.path.join(folder, "README"), encoding="utf-8", errors="replace") as handle:
                if handle.read(200).startswith(_PRE_COMMIT_README):
                    return "a pre-commit store"
        except OSError:
            pass
    return None


_SHOWN_UNREADABLE = 20  # a message names this many paths, then counts the rest


def _unreadable_message(entries: list[tuple[str, str]]) -> str:
    shown = "; ".join(f"{path} ({why})" for path, why in entries[:_SHOWN_UNREADABLE])
    more = f"; and {len(entries) - _SHOWN_UNREADABLE} more" if len(entries) > _SHOWN_UNREADABLE else ""
    return (f"cannot read {len(entries)} path(s) under the folders to check, so their files would go unchecked: "
            f"{shown}{more}. Fix their permissions or replace them with regular files, or leave them out with "
            "`extend-exclude` in the configuration")


def _entry_problem(path: str) -> Optional[str]:
    """Why a *.py entry of a walked folder cannot be checked as a file (None: it can)."""
    from gatekeeper.path_errors import why_missing

    if os.path.isfile(path):
        return None if os.access(path, os.R_OK) else "permission denied"
    if os.path.isdir(path) and not os.path.islink(path):
        return None  # a folder named like a module (`pkg.py/`): walked, not read
    return why_missing(path).removeprefix("it is ").split(";")[0]


def _walk(root: Path, patterns: tuple[str, ...], found: Discovery) -> list[Path]:
    files: list[Path] = []
    bad: list[tuple[Path, str]] = []

    def unreadable_folder(exc: OSError) -> None:
        bad.append((Path(exc.filename or root), f"a folder that cannot be read: {(exc.strerror or str(exc)).lower()}"))

    for folder, dirs, names in os.walk(root, onerror=unreadable_folder, followlinks=False):
        rel = Path(folder).relative_to(root).parts
        kept = []
        for name in sorted(dirs):
            here = os.path.join(folder, name)
            reason = excluded_by((*rel, name), patterns)
            if reason is None:
                try:
                    entries = os.listdir(here)
                except OSError:
                    entries = []
                reason = _marked(here, entries, entries)
            else:
                reason = f"exclude '{reason}'"
            if reason is None:
                kept.append(name)
            else:
                skipped = _count_py(here)
                if skipped:
                    found.skipped += skipped
                    found.reasons.add(reason)
        dirs[:] = kept
        for name in sorted(names):
            if not name.endswith(".py"):
                continue
            pattern = excluded_by((*rel, name), patterns)
            if pattern is not None:
                found.skipped += 1
                found.reasons.add(f"exclude '{pattern}'")
                continue
            why = _entry_problem(os.path.join(folder, name))
            if why is None:
                if os.path.isfile(os.path.join(folder, name)):
                    files.append(Path(folder) / name)
            else:
                bad.append((Path(folder) / name, why))
    files.sort()  # one order for every walk: by path, as the reports list them
    if bad:  # what the excludes and .gitignore leave out is not ours to read
        kept_bad = set(_not_git_ignored(root, [p for p, _ in bad]))
        found.unreadable += [(str(p), why) for p, why in sorted(bad) if p in kept_bad]
    kept_files = _not_git_ignored(root, files)
    if len(kept_files) < len(files):
        found.skipped += len(files) - len(kept_files)
        found.reasons.add(".gitignore")
    return kept_files


def _count_py(folder: str, cap: int = 10_000) -> int:
    """How many *.py files an excluded folder holds, for the message when nothing is left
    (stops at `cap`: a virtual environment holds thousands, and the number only informs)."""
    count = 0
    for _, _, names in os.walk(folder):
        count += sum(1 for n in names if n.endswith(".py"))
        if count >= cap:
            break
    return count


# --- .gitignore ------------------------------------------------------------------------


def _repo_root(folder: Path, cache: dict[Path, Optional[Path]]) -> Optional[Path]:
    if folder not in cache:
        parent = folder.parent
        cache[folder] = folder if (folder / ".git").exists() else (
            None if parent == folder else _repo_root(parent, cache))
    return cache[folder]


def _not_git_ignored(root: Path, files: list[Path]) -> list[Path]:
    """The files .gitignore does not ignore. Files of nested repositories are asked of
    their own repository. A walked folder that is itself ignored keeps its files: the user
    named it."""
    if not files:
        return files
    top = root.absolute()
    cache: dict[Path, Optional[Path]] = {}
    groups: dict[Optional[Path], list[Path]] = {}
    for file in files:
        groups.setdefault(_repo_root(file.absolute().parent, cache), []).append(file.absolute())
    ignored: set[Path] = set()
    for repo, members in groups.items():
        base = repo if repo is not None else top
        root_inside = base == top or base in top.parents
        answer = _ignored_by_git(repo, members) if repo is not None else None
        if answer is not None:
            if root_inside and _ignored_by_git(base, [top]):
                continue  # the named folder is itself ignored: check what the user named
        else:
            rules = _GitignoreRules(base)
            if root_inside and rules.ignores(top, is_dir=True):
                continue
            answer = {f for f in members if rules.ignores(f, is_dir=False)}
        ignored |= answer
    return [f for f in files if f.absolute() not in ignored]


def _ignored_by_git(repo: Path, paths: list[Path]) -> Optional[set[Path]]:
    """The paths git ignores (tracked files never are), or None when git cannot answer
    (not installed, a repository it does not trust, a path beyond a symbolic link)."""
    rel = []
    for path in paths:
        try:
            rel.append(os.path.relpath(path, repo))
        except ValueError:
            return None
    if rel == ["."]:
        return set()
    try:
        proc = subprocess.run(["git", "-C", str(repo), "check-ignore", "-z", "--stdin"],
                              input="\0".join(rel).encode("utf-8", "surrogateescape"), capture_output=True,
                              timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode not in (0, 1):
        return None
    names = {n for n in proc.stdout.decode("utf-8", "surrogateescape").split("\0") if n}
    return {p for p, r in zip(paths, rel) if r in names}


class _GitignoreRules:
    """The .gitignore files from `top` down, read without git: comments, `!` negation,
    a trailing `/` for folders, a `/` anchoring the pattern to its file's folder, `*`,
    `?`, `[...]` and `**`. Enough for the common files; git itself is asked when it can."""

    def __init__(self, top: Path) -> None:
        self.top = top
        # Keyed by the folder's parts below `top`: a tuple, not a Path (pathlib objects cost
        # more to build than the whole match, and every file asks for each of its folders).
        self._by_folder: dict[tuple[str, ...], list[tuple[re.Pattern[str], bool, bool, bool]]] = {}

    def _rules(self, parts: tuple[str, ...]) -> list[tuple[re.Pattern[str], bool, bool, bool]]:
        found = self._by_folder.get(parts)
        if found is None:
            try:
                lines = self.top.joinpath(*parts, ".gitignore").read_text("utf-8", errors="replace").splitlines()
            except OSError:
                lines = []
            found = self._by_folder[parts] = [r for r in map(_compile, lines) if r is not None]
        return found

    def ignores(self, path: Path, is_dir: bool) -> bool:
        """Git's rule: a path below an ignored folder is ignored, whatever later lines say."""
        try:
            parts = path.relative_to(self.top).parts
        except ValueError:
            return False
        for depth in range(1, len(parts) + 1):
            if self._matches(parts[:depth], is_dir or depth < len(parts)):
                return True
        return False

    def _matches(self, parts: tuple[str, ...], is_dir: bool) -> bool:
        verdict = False
        for level in range(len(parts)):  # outer .gitignore files first: deeper ones win
            rules = self._rules(parts[:level])
            if not rules:
                continue
            rel = "/".join(parts[level:])
            for regex, negate, dir_only, anchored in rules:
                if dir_only and not is_dir:
                    continue
                if regex.fullmatch(rel if anchored else parts[-1]):
                    verdict = not negate
        return verdict


def _compile(line: str) -> Optional[tuple[re.Pattern[str], bool, bool, bool]]:
    line = line.rstrip()
    if not line or line.startswith("#"):
        return None
    negate = line.startswith("!")
    if negate or line.startswith("\\"):
        line = line[1:]
    dir_only = line.endswith("/")
    line = line.rstrip("/")
    anchored = "/" in line
    line = line.lstrip("/")
    if not line:
        return None
    out, i = [], 0
    while i < len(line):
        if line.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif line.startswith("**", i):
            out.append(".*")
            i += 2
        elif line[i] == "*":
            out.append("[^/]*")
            i += 1
        elif line[i] == "?":
            out.append("[^/]")
            i += 1
        elif line[i] == "[" and "]" in line[i + 2:]:
            end = line.index("]", i + 2)
            body = line[i + 1:end]
            out.append("[" + ("^" + body[1:] if body.startswith("!") else body) + "]")
            i = end + 1
        else:
            out.append(re.escape(line[i]))
            i += 1
    return re.compile("".join(out)), negate, dir_only, anchored
