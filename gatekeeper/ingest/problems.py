"""The problems directory: each `<stem>.py` is a problem, named by its stem."""

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


def load_problems(folder: Path) -> dict[str, ProblemFile]:
    if not folder.is_dir():
        raise UsageError(f"--problems {folder} is not a folder; give the folder that holds the problem files")
    found: dict[str, ProblemFile] = {}
    for path in sorted(folder.glob("*.py")):
        if not path.is_file() or path.name.startswith("_"):
            continue
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise UsageError(f"cannot read problem file {path}: {exc.strerror}") from None
        found[path.stem] = ProblemFile(name=path.stem, path=path.resolve(), sha256=sha256_bytes(data))
    if not found:
        raise UsageError(f"no problem files (*.py) in {folder}")
    return found
