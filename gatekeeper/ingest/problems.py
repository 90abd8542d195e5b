"""The problems directory: each `<stem>.py` is a problem, named by its stem, and each
sub-folder holding a `reference.py` is a KernelBench-Hard problem, named by the folder."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gatekeeper.errors import UsageError
from gatekeeper.ingest.normalise import sha256_bytes


@dataclass(frozen=True)
class ProblemFile:
    name: str
    path: Path
    sha256: str


HARD_FILES = ("shapes.py", "problem.yaml", "reference.toml")


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read problem file {path}: {exc.strerror}") from None


def load_problems(folder: Path) -> dict[str, ProblemFile]:
    if not folder.is_dir():
        raise UsageError(f"--problems {folder} is not a folder; give the folder that holds the problem files")
    found: dict[str, ProblemFile] = {}
    for path in sorted(folder.glob("*.py")):
        if not path.is_file() or path.name.startswith("_"):
            continue
        found[path.stem] = ProblemFile(name=path.stem, path=path.resolve(), sha256=sha256_bytes(_read(path)))
    for path in sorted(folder.glob("*/reference.py")):
        name = path.parent.name
        if name in found:
            raise UsageError(f"problem {name!r} is both {folder / (name + '.py')} and the folder {path.parent}; "
                             "rename one")
        found[name] = _hard_folder(path.parent)
    if not found:
        raise UsageError(f"no problem files (*.py) or KernelBench-Hard problem folders (*/reference.py) in {folder}")
    return found


def _hard_folder(folder: Path) -> ProblemFile:
    """KernelBench-Hard: the folder is the problem; its hash covers the files that define it."""
    parts = [_read(folder / "reference.py")] + [_read(folder / n) for n in HARD_FILES if (folder / n).is_file()]
    return ProblemFile(name=folder.name, path=folder.resolve(), sha256=sha256_bytes(b"\0".join(parts)))


def mapped_problems(source: Path, config) -> dict[str, ProblemFile]:
    """Without --problems: the problems the configuration's [[problem_map]] gives the files of
    a folder source, named by stem as the mapper names them. A file the map cannot place is
    left to the plan, which records it as a bad record with the map's own message."""
    from gatekeeper.problem.mapping import map_problem

    if not source.is_dir() or not config.problem_map:
        why = ("JSONL and parquet records name their problem, so give the folder that holds those problems"
               if not source.is_dir() else f"the configuration ({config.source or 'none found'}) has no "
               "[[problem_map]] to find each file's problem")
        raise UsageError(f"--problems is needed: {why} (--problems DIR)")
    found: dict[str, ProblemFile] = {}
    for path in sorted(p for p in source.rglob("*.py") if p.is_file()):
        try:
            target = map_problem(path, config)
        except UsageError:
            continue
        if target is None:
            continue
        problem = _hard_folder(target) if target.is_dir() else ProblemFile(
            name=target.stem, path=target.resolve(), sha256=sha256_bytes(_read(target)))
        if problem.name in found and found[problem.name].path != problem.path:
            raise UsageError(f"[[problem_map]] gives two problems named {problem.name!r} ({found[problem.name].path} "
                             f"and {problem.path}); results are stored by problem name, so rename one or give --problems")
        found[problem.name] = problem
    if not found:
        raise UsageError(f"--problems is needed: the [[problem_map]] of {config.source} maps none of the files in "
                         f"{source}")
    return found
