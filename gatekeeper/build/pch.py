"""A precompiled torch/extension.h for C++ extension builds (`[build] precompiled_header`).

Most of a small extension's compile is GCC reading torch's headers: 23 s for a fixture here,
13 s with the header precompiled. GCC looks for `<header>.gch` in each include directory
before the header, and uses one only when it was made with compatible options (otherwise it
reads the header as usual), so pointing the build's CPATH at a folder holding
`torch/extension.h.gch/` speeds up every compatible build and changes nothing else: the
object code is the same, the build cache key too.

Trust: the parent makes the headers from torch's own headers (build/pch_compile.py), never
from a submission, and a bubblewrap worker sees them read-only. Their inode, size and ctime
are recorded when made and checked before each use, so a file changed since (by a worker
under weaker isolation, say) is never handed to a later build: the folder is remade.
Making them costs about a minute of CPU once per toolchain and about 1.6 GB of disk, which
pays off from about eight builds on: it is off by default, on for leaderboards and CI.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from gatekeeper import progress
from gatekeeper.build.cache import cache_root
from gatekeeper.build.sources import toolchain_identity

ENV = "GATEKEEPER_PRECOMPILED_HEADER"
DIR_ENV = "GATEKEEPER_PRECOMPILED_HEADER_DIR"  # default: <build cache>/pch
_MANIFEST = "manifest.json"
_FAILED = "failed.txt"


@dataclass(frozen=True)
class Headers:
    """A folder to put on CPATH, and the files in it a sandboxed build must see."""

    root: Path
    files: tuple[str, ...]


def wanted(configured: bool) -> bool:
    """The environment variable (1/0) overrides the configuration."""
    given = os.environ.get(ENV, "").strip().lower()
    if given in ("1", "true", "yes", "on"):
        return True
    if given in ("0", "false", "no", "off"):
        return False
    return configured


def home() -> Path:
    """A toolchain's headers, not a submission's: one folder can serve several build caches."""
    given = os.environ.get(DIR_ENV)
    return Path(given).expanduser().resolve() if given else cache_root() / "pch"


def _signature() -> str:
    cxx = (os.environ.get("CXX", "").split() or ["c++"])[0]
    compiler = os.path.realpath(shutil.which(cxx) or cxx)
    try:
        stamp = str(os.stat(compiler).st_mtime_ns)
    except OSError:
        stamp = "?"
    parts = [*toolchain_identity(), compiler, stamp, "v2"]
    return hashlib.sha256("\0".join(parts).encode("utf-8", errors="surrogatepass")).hexdigest()[:20]


def _stamp(path: Path) -> list[int]:
    st = path.stat()
    return [st.st_ino, st.st_size, st.st_ctime_ns]


def _verified(root: Path) -> Optional[Headers]:
    try:
        manifest = json.loads((root / _MANIFEST).read_text("utf-8"))
        files = tuple(str(root / rel) for rel in manifest)
        if files and all(_stamp(Path(f)) == stamp for f, stamp in zip(files, manifest.values())):
            return Headers(root, files)
    except (OSError, ValueError, TypeError):
        pass
    return None


def prepare(configured: bool, cuda: bool) -> Optional[Headers]:
    """The headers for a build, made first if need be; None when not wanted, not possible
    (not GCC, a failed attempt), for CUDA builds (nvcc's host passes are left as they are),
    or while another process is making them (that build goes without, rather than wait)."""
    if not wanted(configured) or cuda or not sys.platform.startswith("linux"):
        return None
    base = home()
    root = base / _signature()
    found = _verified(root)
    if found is not None or (root / _FAILED).is_file():
        return found
    base.mkdir(parents=True, exist_ok=True)
    with open(base / f"{root.name}.lock", "a+") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return None
        found = _verified(root)  # made by the holder before us
        if found is not None or (root / _FAILED).is_file():
            return found
        return _make(root)


def _make(root: Path) -> Optional[Headers]:
    progress.step("precompiling torch/extension.h for C++ builds (once per toolchain)")
    shutil.rmtree(root, ignore_errors=True)  # a changed or half-made folder
    scratch = Path(tempfile.mkdtemp(prefix=f"{root.name}.", dir=root.parent))
    try:
        done = subprocess.run([sys.executable, "-m", "gatekeeper.build.pch_compile", str(scratch)],
                              capture_output=True, text=True, timeout=1800)
        lines = done.stdout.strip().splitlines()
        result = json.loads(lines[-1]) if lines else {"made": [], "why": done.stderr[-1500:]}
    except (OSError, subprocess.TimeoutExpired, ValueError) as exc:
        result = {"made": [], "why": f"{type(exc).__name__}: {exc}"}
    if not result.get("made"):
        shutil.rmtree(scratch, ignore_errors=True)
        root.mkdir(parents=True, exist_ok=True)
        (root / _FAILED).write_text(str(result.get("why", "unknown"))[-2000:] + "\n", "utf-8")
        return None
    rels = [f"torch/extension.h.gch/{name}" for name in result["made"]] + ["torch/extension.h"]
    os.replace(scratch, root)
    (root / _MANIFEST).write_text(json.dumps({rel: _stamp(root / rel) for rel in rels}), "utf-8")
    return _verified(root)


def main() -> int:
    """`python -m gatekeeper.build.pch`: make the headers now (a leaderboard's or CI's setup
    step, so that no check waits for them) and say where they are or why there are none."""
    headers = prepare(True, cuda=False)
    if headers is not None:
        print(f"precompiled torch/extension.h ready in {headers.root} ({len(headers.files)} variants)")
        return 0
    failed = home() / _signature() / _FAILED
    if not wanted(True):
        why = f"{ENV} switches them off"
    elif not sys.platform.startswith("linux"):
        why = "GCC's precompiled headers are used on Linux only"
    else:
        why = failed.read_text("utf-8").strip() if failed.is_file() else "another process is making them now"
    print(f"no precompiled header: {why}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
