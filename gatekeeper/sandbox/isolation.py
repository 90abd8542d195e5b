"""Which OS isolation the sandbox uses on this machine, detected once per process.

Order of preference (`GATEKEEPER_ISOLATION` = auto | bwrap | unshare | none picks one;
auto is the default):

- `bwrap`: bubblewrap. The worker sees a read-only view of only what it needs (the system
  toolchain under /usr, the interpreter's prefix, gatekeeper's own package, the files named
  in its job), a private writable working directory and /tmp (size-capped tmpfs), the
  folders it may write (its build cache key), no network, its own user, pid, ipc and uts
  namespaces (it cannot see or signal the parent or other workers), no capabilities, a new
  session, and it dies with the parent.
- `unshare`: `unshare -rn --pid --fork --kill-child --mount-proc`: own user, network and pid namespace
  (no network; the worker cannot see or signal processes outside; its tree dies with it),
  but the file system is the user's.
- `none`: the Python-level layers only (audit hook, limits, process-group kill), and a
  harness process (sandbox/shim.py) as the worker's parent, so that a worker signalling
  its parent does not reach gatekeeper.

The name in force goes into the report (`environment.isolation`).
"""

from __future__ import annotations

import functools
import glob
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Iterable, Optional

LEVELS = ("bwrap", "unshare", "none")
SHIM_SCRIPT = str(Path(__file__).resolve().with_name("shim.py"))
READONLY_SCRIPT = str(Path(__file__).resolve().with_name("readonly_fs.py"))
# Size of the private /tmp and working directory tmpfs inside bubblewrap (disk cap).
WORKDIR_BYTES = 512 * 1024 ** 2
# Side files a submission may compile (`load(sources=[...])`): visible next to it.
_SIDE_SUFFIXES = (".cu", ".cuh", ".cpp", ".cc", ".cxx", ".c", ".h", ".hpp", ".hh", ".inl")
# The few files under /etc that the interpreter, the compiler and torch need.
_ETC = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "passwd", "group", "nsswitch.conf",
        "localtime", "os-release", "ssl/certs")


class IsolationRequired(RuntimeError):
    """`--require-isolation` (or `require_isolation = true`) and bubblewrap is not usable."""


@dataclass(frozen=True)
class Isolation:
    name: str  # "bwrap" | "unshare" | "none"
    detail: str
    tool: Optional[str] = None
    own_pid_namespace: bool = False
    extra_ro: tuple[str, ...] = field(default_factory=tuple)
    # Why no stronger level is in force (None under bubblewrap): shown with -v, in the
    # report (environment.isolation_reason) and by --require-isolation.
    reason: Optional[str] = None

    def wrap(self, argv: list[str], *, workdir: Path, read_paths: Iterable[str] = (),
             write_paths: Iterable[str] = ()) -> list[str]:
        """The command line that runs `argv` under this isolation."""
        if self.name == "unshare":
            # setsid: the worker (pid 1 of the namespace) leaves unshare's process group, so
            # kill(0, ...) from inside cannot reach unshare itself.
            setsid = shutil.which("setsid") or "setsid"
            # --mount-proc: a /proc of the new pid namespace (the CUDA driver fails without it).
            # readonly_fs.py: every mount read-only but the worker's own folders, before the
            # worker starts (issue 22 item 6: native code must not write the host's files).
            writable = [str(workdir), *[str(w) for w in write_paths]]
            return [str(self.tool), "-rn", "--pid", "--fork", "--kill-child", "--mount-proc", "--",
                    sys.executable, "-I", "-S", READONLY_SCRIPT, *writable, "--", setsid, *argv]
        if self.name != "bwrap":
            # No pid namespace: a harness process in between, so that the worker's parent
            # (`os.getppid()`) is not gatekeeper (issue 12, row 2; sandbox/shim.py).
            return [sys.executable, "-I", "-B", "-S", SHIM_SCRIPT, str(os.getpid()), "--", *argv]
        return [str(self.tool), *bwrap_args(workdir, read_paths, write_paths, self.extra_ro), "--", *argv]


def _gatekeeper_package() -> str:
    return str(Path(__file__).resolve().parents[1])


def _interpreter_roots() -> list[str]:
    roots = {os.path.realpath(sys.prefix), os.path.realpath(sys.base_prefix),
             os.path.dirname(os.path.dirname(os.path.realpath(sys.executable)))}
    # site-packages outside the prefix (a user site, a distro's dist-packages).
    for entry in sys.path:
        if entry.endswith(("site-packages", "dist-packages")) and os.path.isdir(entry):
            roots.add(os.path.realpath(entry))
    return sorted(roots)


# Compilers a build may run: torch passes $CC to nvcc as -ccbin, ninja runs c++ and nvcc.
_COMPILERS = ("c++", "g++", "gcc", "cc", "clang", "clang++", "nvcc", "ninja", "ld", "as")
_COMPILER_ENV = ("CC", "CXX", "CUDAHOSTCXX", "NVCC_CCBIN")


def toolchain_roots() -> list[str]:
    """Install prefixes of the compilers outside /usr (a GCC under /opt/gcc, a CUDA toolkit
    under /opt): without them every build fails inside the sandbox, which would read as the
    submission's compile error. Only a `<prefix>/bin/<tool>` layout counts, never `/` or a
    home directory, so a PATH entry like ~/bin does not expose the user's files."""
    found = [os.environ.get(name, "").split()[0] for name in _COMPILER_ENV if os.environ.get(name, "").strip()]
    found += [shutil.which(tool) or "" for tool in _COMPILERS]
    roots: set[str] = set()
    for tool in found:
        tool = shutil.which(tool) or tool
        for path in {os.path.abspath(tool), os.path.realpath(tool)}:
            folder = os.path.dirname(path)
            if os.path.basename(folder) != "bin":
                continue
            prefix = os.path.dirname(folder)
            if prefix in ("/", "") or prefix.startswith(("/usr", "/home", "/root", "/tmp")) or not os.path.isdir(prefix):
                continue
            roots.add(prefix)
    return sorted(roots)


def _read_only_system() -> list[str]:
    args: list[str] = []
    for top in ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    for name in _ETC:
        path = os.path.join("/etc", name)
        if os.path.exists(path):
            args += ["--ro-bind", path, path]
    for cuda in {os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda", "/opt/cuda"}:
        if cuda and os.path.isdir(cuda) and not cuda.startswith("/usr/"):
            args += ["--ro-bind", cuda, cuda]
    for prefix in toolchain_roots():
        args += ["--ro-bind", prefix, prefix]
    return args


def _devices() -> list[str]:
    args = ["--dev", "/dev", "--tmpfs", "/dev/shm"]
    for device in sorted(glob.glob("/dev/nvidia*")) + sorted(glob.glob("/dev/dri/*")):
        args += ["--dev-bind", device, device]
    if os.path.isdir("/dev/nvidia-caps"):
        args += ["--dev-bind", "/dev/nvidia-caps", "/dev/nvidia-caps"]
    return args


def visible_files(paths: Iterable[str]) -> list[str]:
    """The files a job names plus, for each, its side sources in the same folder (C++/CUDA
    files a submission compiles), never the folder itself."""
    out: list[str] = []
    for raw in paths:
        if os.path.isfile(raw):
            out += bundle_sources(raw)
    return list(dict.fromkeys(out))


def bundle_sources(path: str) -> list[str]:
    """`path` (real) first, then the Python modules a submission ships beside it
    (gatekeeper/submission_files.py) and the C++/CUDA sources in its folder and theirs."""
    path = os.path.realpath(path)
    out = [path]
    folders = [os.path.dirname(path)]
    if path.endswith(".py"):
        from gatekeeper.submission_files import local_modules

        try:
            text = Path(path).read_text("utf-8", errors="replace")
        except OSError:
            text = ""
        modules = [str(m) for m in local_modules(text, path)]
        out += modules
        folders += [os.path.dirname(m) for m in modules]
    for folder in dict.fromkeys(folders):
        out += _side_sources(folder)
    return list(dict.fromkeys(out))


def _side_sources(folder: str, depth: int = 1, limit: int = 200) -> list[str]:
    """C++/CUDA files in `folder` and its subfolders down to `depth` (a `csrc/` beside the
    submission), at most `limit` of them."""
    found: list[str] = []
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError:
        return found
    for entry in entries:
        if len(found) >= limit:
            break
        try:
            is_file = entry.is_file()
        except OSError:  # a symbolic link loop (ELOOP), a file gone meanwhile: nothing a build could read
            continue
        if is_file and entry.name.endswith(_SIDE_SUFFIXES):
            found.append(entry.path)
        elif depth > 0 and entry.is_dir(follow_symlinks=False) and not entry.name.startswith("."):
            found += _side_sources(entry.path, depth - 1, limit - len(found))
    return found


def bwrap_args(workdir: Path, read_paths: Iterable[str], write_paths: Iterable[str],
               extra_ro: Iterable[str] = ()) -> list[str]:
    work = os.path.realpath(workdir)
    args = ["--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
            "--hostname", "sandbox", *_read_only_system(), *_devices(), "--proc", "/proc"]
    if os.path.isdir("/sys"):
        args += ["--ro-bind", "/sys", "/sys"]
    mounts: list[tuple[str, list[str]]] = [("/tmp", ["--size", str(WORKDIR_BYTES), "--tmpfs", "/tmp"])]
    for root in _interpreter_roots() + [_gatekeeper_package(), *extra_ro]:
        mounts.append((root, ["--ro-bind", root, root]))
    for path in visible_files(read_paths):
        mounts.append((path, ["--ro-bind", path, path]))
    # The working directory is a fresh size-capped tmpfs: the parent's stdout/stderr files
    # in the real folder stay out of the worker's reach.
    mounts.append((work, ["--size", str(WORKDIR_BYTES), "--tmpfs", work]))
    # TMPDIR (work/tmp) must exist inside too: nvcc, unlike gcc, does not fall back to /tmp.
    mounts.append((os.path.join(work, "tmp"), ["--dir", os.path.join(work, "tmp")]))
    for path in write_paths:
        real = os.path.realpath(path)
        os.makedirs(real, exist_ok=True)
        mounts.append((real, ["--bind", real, real]))
    # bubblewrap mounts in order, and a later mount hides what an earlier one put below it:
    # shallower paths first, so that a tmpfs over /tmp or over a working folder never hides
    # an interpreter, a package or a file that lives there (a virtual environment under
    # /tmp). The sort is stable: at equal depth the order above stands (writes last).
    for _, mount in sorted(mounts, key=lambda m: len(Path(m[0]).parts)):
        args += mount
    args += ["--chdir", work]
    return args


def _probe(isolation: Isolation) -> Optional[str]:
    """None when a job can run under `isolation` the way real jobs do (this interpreter, a
    fresh working folder under the temp dir), else what went wrong, in the tool's words."""
    workdir = Path(tempfile.mkdtemp(prefix="gatekeeper-probe-"))
    try:
        argv = isolation.wrap([sys.executable, "-I", "-c", "import os; os.kill(os.getppid() or 1, 0)"],
                              workdir=workdir)
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, timeout=20)
    except subprocess.TimeoutExpired:
        return "it did not start a test job within 20 s"
    except (OSError, subprocess.SubprocessError) as exc:
        return f"it could not be started: {exc}"
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    if done.returncode == 0:
        return None
    lines = [line.strip() for line in done.stderr.decode("utf-8", "replace").splitlines() if line.strip()]
    said = lines[-1][:300] if lines else "no message"
    return f"a test job exited with status {done.returncode} ({said})"


def _userns_limits() -> list[str]:
    """Kernel settings that switch unprivileged user namespaces off, as found on this machine."""
    found = []
    for path, off in (("/proc/sys/kernel/unprivileged_userns_clone", "0"), ("/proc/sys/user/max_user_namespaces", "0"),
                      ("/proc/sys/kernel/apparmor_restrict_unprivileged_userns", "1")):
        try:
            with open(path) as handle:
                value = handle.read().strip()
        except OSError:
            continue
        if value == off:
            found.append(f"{path} is {value}")
    return found


def _bwrap_fix(said: str) -> str:
    """How to make an installed bubblewrap usable, from what it said and the kernel settings."""
    limits = _userns_limits()
    if limits or "namespace" in said.lower() or "uid map" in said.lower():
        where = f" ({'; '.join(limits)})" if limits else ""
        return (f"it needs unprivileged user namespaces, which this machine denies or has used up{where}: allow "
                "them (sysctl kernel.unprivileged_userns_clone=1, user.max_user_namespaces>0, or on Ubuntu 24.04+ "
                "kernel.apparmor_restrict_unprivileged_userns=0 or an AppArmor profile for bwrap; in a container, "
                "run it with a seccomp profile that allows clone/unshare)")
    return "run `bwrap --unshare-all --ro-bind / / true` to see the failure, and fix what it reports"


def _candidate(name: str) -> Optional[Isolation]:
    if name == "bwrap":
        tool = shutil.which("bwrap")
        if tool:
            return Isolation("bwrap", "bubblewrap: read-only view of the toolchain and the job's files, private "
                             "working dir and /tmp, no network, own user/pid/ipc namespaces, no capabilities, "
                             "new session, dies with the parent", tool, True)
    elif name == "unshare":
        tool = shutil.which("unshare")
        if tool:
            return Isolation("unshare", "unshare -rn --pid: own user, network and pid namespace (no network, "
                             "cannot signal outside processes); the file system is shared", tool, True)
    return None


def requested() -> str:
    value = os.environ.get("GATEKEEPER_ISOLATION", "auto").strip().lower() or "auto"
    return value if value in LEVELS + ("auto",) else "auto"


@functools.lru_cache(maxsize=4)
def _detect(choice: str) -> Isolation:
    if choice == "none":
        return Isolation("none", "disabled by GATEKEEPER_ISOLATION=none",
                         reason="GATEKEEPER_ISOLATION=none turns OS isolation off; unset it to use bubblewrap "
                         "where it works")
    order = ("bwrap", "unshare") if choice == "auto" else (choice,)
    why_not: list[str] = []
    for name in order:
        candidate = _candidate(name)
        if candidate is None:
            why_not.append("bubblewrap is not installed (no `bwrap` on PATH); install it (apt-get install "
                           "bubblewrap, or dnf install bubblewrap)" if name == "bwrap" else
                           "`unshare` (util-linux) is not installed")
            continue
        failure = _probe(candidate)
        if failure is None:
            if name == "bwrap":
                return candidate
            return replace(candidate, reason="; ".join(why_not) or f"GATEKEEPER_ISOLATION={choice} chose it")
        if name == "bwrap":
            why_not.append(f"bubblewrap ({candidate.tool}) is installed but cannot be used here: {failure}; "
                           f"{_bwrap_fix(failure)}")
        else:
            why_not.append(f"unshare -rn ({candidate.tool}) does not work either: {failure}")
    reason = "; ".join(why_not)
    if choice != "auto":
        return Isolation("none", f"GATEKEEPER_ISOLATION={choice} asked for {choice}, which does not work on this "
                         "machine: the network and the file system are reachable", reason=reason)
    return Isolation("none", "neither bubblewrap nor user namespaces work on this machine: the network and the "
                     "file system are reachable", reason=reason)


def detect() -> Isolation:
    return _detect(requested())


def isolation_required() -> bool:
    return os.environ.get("GATEKEEPER_REQUIRE_ISOLATION", "").strip().lower() in ("1", "true", "yes")


def reason_for(name: Optional[str]) -> Optional[str]:
    """Why a report's isolation level (as the workers ran) is not bubblewrap, or None."""
    if not name or name == "bwrap":
        return None
    found = detect()
    return found.reason if found.name == name else None


def require(isolation: Optional[Isolation] = None) -> Isolation:
    """Raise IsolationRequired when isolation is required and bubblewrap is not in force."""
    found = isolation or detect()
    asked = requested()
    if asked not in ("auto", "none") and found.name != asked:
        # An explicit level that does not work is refused, never silently weakened to none.
        raise IsolationRequired(f"GATEKEEPER_ISOLATION={asked} asked for {asked} isolation, which does not work on "
                                f"this machine ({found.reason or found.detail}); fix it, or choose another level "
                                "(auto, unshare, none)")
    if found.name == "none" and asked == "auto":
        # Nothing that defends the file system works here. Untrusted code runs undefended only
        # when the user says so (issue 22 item 6): contained is the default, not a hope.
        why = found.reason or found.detail
        raise IsolationRequired(
            f"no isolation that keeps the submission off this machine's files works here: {why}; fix that, or "
            "set GATEKEEPER_ISOLATION=none to run submissions with no OS isolation at all (only for code you trust)")
    if isolation_required() and found.name != "bwrap":
        # The reason says what to do: install bubblewrap only where it is missing, else why it fails.
        raise IsolationRequired(
            f"isolation required (--require-isolation or require_isolation = true) but this machine gives "
            f"'{found.name}': {found.reason or found.detail}; fix that, or run without --require-isolation")
    return found
