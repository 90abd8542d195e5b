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
        # KernelBench-Hard: the folder is the problem; its hash covers the files that define it
        parts = [_read(path)] + [_read(path.parent / n) for n in HARD_FILES if (path.parent / n).is_file()]
        name = path.parent.name
        if name in found:
            raise UsageError(f"problem {name!r} is both {folder / (name + '.py')} and the folder {path.parent}; "
                             "rename one")
        found[name] = ProblemFile(name=name, path=path.parent.resolve(), sha256=sha256_bytes(b"\0".join(parts)))
    if not found:
        raise UsageError(f"no problem files (*.py) or KernelBench-Hard problem folders (*/reference.py) in {folder}")
    return found
