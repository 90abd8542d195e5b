"""Why a path the user named cannot be read, in words that say what to fix.

"not found" is wrong for a symbolic link that loops or dangles, a folder where a file was
expected, or a file without read permission (issue 12, misleading messages)."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Union


def why_missing(path: Union[str, Path], expected: str = "file") -> str:
    """A short reason, e.g. "no such file", "a symbolic link loop (a.py -> b.py -> a.py)"."""
    name = str(path)
    if os.path.islink(name):
        chain = _link_chain(name)
        if chain[-1] in [_shown(os.path.abspath(c)) for c in chain[:-1]]:
            return f"it is a symbolic link loop ({' -> '.join(chain)}); point the link at a real {expected}"
        if os.path.exists(name):  # the link resolves, to something that is not a regular file
            return (f"it is a symbolic link to {chain[-1]}, which is {kind_of(name)}, not a regular {expected} "
                    f"({' -> '.join(chain)}); point the link at a real {expected}")
        return (f"it is a symbolic link to {chain[-1]}, which does not exist ({' -> '.join(chain)}); "
                f"fix or remove the link")
    if not os.path.lexists(name):
        parent = os.path.dirname(os.path.abspath(name))
        if not os.path.isdir(parent):
            return f"no such {expected}: its folder {parent} does not exist"
        return f"no such {expected}"
    if expected == "file" and os.path.isdir(name):
        return "it is a folder, not a file"
    if not os.access(name, os.R_OK):
        return "it cannot be read (permission denied)"
    return f"it is {kind_of(name)}, not a regular {expected}"


def kind_of(path: Union[str, Path]) -> str:
    """What is at `path` (links followed), in words: "a named pipe (FIFO)", "a character device"."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return "something that cannot be examined"
    for test, words in ((stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISCHR, "a character device"),
                        (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a folder"),
                        (stat.S_ISREG, "a regular file")):
        if test(mode):
            return words
    return "a special file"


def unreadable_folder(path: Union[str, Path], exc: OSError) -> str:
    """The message for a folder that cannot be listed (permission denied, a loop, an I/O error)."""
    why = (exc.strerror or str(exc)).lower()
    return (f"cannot read folder {path}: {why}; give it read and search permission (chmod u+rx), "
            "or name the files to check instead")


def _link_chain(name: str, limit: int = 8) -> list[str]:
    """The link and its targets in order, up to the first repeat (a loop), a target that is
    not a link, or `limit` hops. A repeat appears twice, so the caller can tell a loop."""
    seen = [os.path.abspath(name)]
    for _ in range(limit):
        try:
            target = os.readlink(seen[-1])
        except OSError:
            break
        seen.append(os.path.normpath(os.path.join(os.path.dirname(seen[-1]), target)))
        if seen[-1] in seen[:-1] or not os.path.islink(seen[-1]):
            break
    return [name] + [_shown(p) for p in seen[1:]]


def _shown(path: str) -> str:
    relative = os.path.relpath(path)
    return relative if not relative.startswith("..") else path


def not_found(path: Union[str, Path], what: str, expected: str = "file") -> str:
    """The message for a `what` ("problem file", "submission") at `path` that cannot be
    opened: "<what> not found: <path>" only when nothing is there, else what is there."""
    if not os.path.lexists(str(path)):
        return f"{what} not found: {path}"
    return f"cannot read the {what} {path}: {why_missing(path, expected)}"
