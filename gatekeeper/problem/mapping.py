"""From a submission's path to its problem, by the configuration's `[[problem_map]]`
entries, so that `check`, the pre-commit hook and ingest need no `--problem` flag.

    [[tool.gatekeeper.problem_map]]
    submissions = "runs/level{level}/{id}_*.py"       # glob; {field} captures part of a segment
    problem = "KernelBench/level{level}/{id}_*.py"    # template; a glob must match one file
    # or a KernelBench-Hard folder (reference.py, shapes.py, problem.yaml):
    # problem = "problems/{name}"

The first entry whose `submissions` pattern matches wins. Paths are relative to the folder
of the configuration file (the current folder when there is none). Besides the captured
fields, a template may use `{stem}` (file name without .py), `{name}` (file name) and
`{dir}` (the submission's folder, relative).
"""

from __future__ import annotations

import glob
import re
import string
from functools import lru_cache
from pathlib import Path
from typing import Optional

from gatekeeper.errors import UsageError

# The files of a KernelBench-Hard problem folder that are not the submission (solution.py).
HARD_HARNESS_FILES = ("reference.py", "shapes.py", "sota.py", "check.py", "benchmark.py")
_TOKEN = re.compile(r"\*\*/|\*\*|\*|\?|\{([A-Za-z_][A-Za-z0-9_]*)\}|\[[^\]/]*\]")


@lru_cache(maxsize=64)
def pattern_regex(pattern: str) -> re.Pattern:
    """A submissions glob as a regex over posix paths: `**/` any folders, `*` and `?`
    within a segment, `{field}` a named capture within a segment (the same name twice
    must match the same text)."""
    out, seen, pos = [], set(), 0
    for match in _TOKEN.finditer(pattern):
        out.append(re.escape(pattern[pos:match.start()]))
        token = match.group(0)
        if token == "**/":
            out.append(r"(?:[^/]+/)*")
        elif token == "**":
            out.append(r".*")
        elif token == "*":
            out.append(r"[^/]*")
        elif token == "?":
            out.append(r"[^/]")
        elif token.startswith("["):
            out.append(token)
        else:
            name = match.group(1)
            out.append(f"(?P={name})" if name in seen else f"(?P<{name}>[^/]+?)")
            seen.add(name)
        pos = match.end()
    out.append(re.escape(pattern[pos:]))
    return re.compile("".join(out) + r"\Z")


def _base(config) -> Path:
    return Path(config.source).resolve().parent if config.source else Path.cwd().resolve()


def _relative(path: Path, base: Path) -> Optional[str]:
    try:
        return path.resolve().relative_to(base).as_posix()
    except ValueError:
        return None


def _is_problem(path: Path) -> bool:
    """A problem file, or a KernelBench-Hard problem folder."""
    return path.is_file() or (path.is_dir() and (path / "reference.py").is_file())


def map_problem(submission: Path, config) -> Optional[Path]:
    """The problem file (or KernelBench-Hard folder) for `submission`, or None when no entry's pattern matches it.
    A matching entry whose problem cannot be found is a usage error (exit 2) that names
    the entry and the path it tried."""
    if not config.problem_map:
        return None
    base = _base(config)
    rel = _relative(submission, base)
    if rel is None:
        return None
    for number, entry in enumerate(config.problem_map, 1):
        match = pattern_regex(entry.submissions).match(rel)
        if match is None:
            continue
        fields = {"stem": submission.stem, "name": submission.name,
                  "dir": str(Path(rel).parent.as_posix()), **match.groupdict()}
        target = _fill(entry, number, fields, config)
        where = f"problem_map entry {number} ({entry.submissions!r} -> {entry.problem!r}) in " \
                f"{config.source or 'the configuration'}"
        if glob.has_magic(target):
            # Path.glob refuses absolute patterns; glob.glob takes both, and root_dir keeps base's own
            # characters literal (base / an absolute path is that path).
            hits = glob.glob(target, root_dir=base, recursive=True)
            found = sorted(p for p in (base / hit for hit in hits) if _is_problem(p))
            if len(found) == 1:
                return found[0]
            if not found:
                raise UsageError(f"{rel}: {where} gives {target!r}, which matches no file under {base}; "
                                 "fix the template or give --problem")
            shown = ", ".join(_shown(p, base) for p in found[:4])
            raise UsageError(f"{rel}: {where} gives {target!r}, which matches {len(found)} files ({shown}); "
                             "make the template specific enough to match one")
        path = base / target
        if not _is_problem(path):
            raise UsageError(f"{rel}: {where} gives {target}, which does not exist under {base}; "
                             "fix the template or give --problem")
        return path
    return None


def _fill(entry, number: int, fields: dict[str, str], config) -> str:
    """The entry's problem template filled from the captures; a field the submissions
    pattern does not capture (nor stem, name, dir) is a configuration error (exit 2)."""
    where = f"problem_map entry {number} in {config.source or 'the configuration'}"
    try:
        used = [name for _, name, _, _ in string.Formatter().parse(entry.problem) if name is not None]
    except ValueError as exc:
        raise UsageError(f"{where}: the problem template {entry.problem!r} is not a valid template ({exc}); "
                         "write fields as {name} and a literal brace as {{ or }}") from None
    missing = sorted({name for name in used if name not in fields})
    if missing:
        known = ", ".join(f"{{{n}}}" for n in sorted(fields))
        raise UsageError(f"{where}: the problem template {entry.problem!r} uses "
                         f"{', '.join(f'{{{n}}}' for n in missing)}, which the submissions pattern "
                         f"{entry.submissions!r} does not capture; use only {known}")
    try:
        return entry.problem.format(**fields)
    except (KeyError, IndexError, ValueError, AttributeError) as exc:  # {id.x}, {id[0]}, {id:bad}
        raise UsageError(f"{where}: the problem template {entry.problem!r} cannot be filled ({exc}); "
                         "use plain fields such as {id}") from None


def _shown(path: Path, base: Path) -> str:
    try:
        return path.relative_to(base).as_posix()
    except ValueError:
        return path.as_posix()


def is_problem_file(path: Path, config) -> bool:
    """Whether `path` is the target of some problem_map entry's template (a problem file
    that sits beside the submissions and must not be checked as one)."""
    if not config.problem_map:
        return False
    base = _base(config)
    rel = _relative(path, base)
    if rel is None:
        return False
    for entry in config.problem_map:
        template = re.sub(r"\{[A-Za-z_][A-Za-z0-9_]*\}", "*", entry.problem)
        if pattern_regex(template).match(rel):
            return True
        folder = template.rstrip("/")  # a KernelBench-Hard folder: its harness files, not solution.py
        if any(pattern_regex(f"{folder}/{name}").match(rel) for name in HARD_HARNESS_FILES):
            return True
    return False
