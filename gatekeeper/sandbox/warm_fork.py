"""The warm worker, zygote side: a process that has imported torch forks each job into a
sandbox that bubblewrap built (docs/design-warm-worker.md).

`import torch` costs about a second of CPU, and a fresh worker paid it for every job. The
zygote pays it once. It runs outside any sandbox and never runs submission or problem code:
it only forks. For each job the parent (sandbox/warm.py) starts bubblewrap as always, with
the job's own view, namespaces and limits, and a tiny holder command in it; then it hands
the zygote the job's pipes. The zygote forks a child that joins every namespace of that
sandbox (`setns` on a pidfd: user, mount, pid, network, ipc, uts, cgroup) and forks the job
there, so the job is a member of the sandbox's pid namespace and dies with it. Before any job
code runs, the job:
- is in a new session (its parent's, as under bubblewrap's init) and dies with its parent;
- takes the job's pipes as fds 0-3 and closes every other fd the zygote had;
- drops every capability (bounding set too) and sets no_new_privs, as bubblewrap does;
- takes the job's environment and working folder;
- says so on an acknowledgement pipe. The parent runs the job classically when that never
  comes: a sandbox that could not be joined never runs a job (fail closed).
The job then continues as `worker.main()`, exactly as a fresh worker would.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import socket
import sys
from typing import Callable

# setns(2) flags: every namespace bubblewrap's --unshare-all creates.
_NAMESPACES = (0x10000000  # CLONE_NEWUSER, first: it grants the rights to join the rest
               | 0x00020000  # CLONE_NEWNS
               | 0x20000000  # CLONE_NEWPID (for the children: the job)
               | 0x40000000  # CLONE_NEWNET
               | 0x08000000  # CLONE_NEWIPC
               | 0x04000000  # CLONE_NEWUTS
               | 0x02000000)  # CLONE_NEWCGROUP
_PR_SET_PDEATHSIG, _PR_CAPBSET_DROP, _PR_SET_NO_NEW_PRIVS, _PR_CAP_AMBIENT = 1, 24, 38, 47
_JOB_FDS = 6  # stdin, stdout, stderr, result, status (to the holder), acknowledgement


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def serve(sock_fd: int, main: Callable[[], None]) -> None:
    """The zygote's loop: one request (a JSON object and the job's fds) per fork, answered
    with the child's pid; each job ends up in `main` (worker.main). Ends when the parent
    closes its end."""
    sock = socket.socket(fileno=sock_fd)
    # Children are reaped by the kernel; the forked child puts the default back (it waits).
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    sock.sendall(b'{"ready": true}')
    while True:
        try:
            data, fds, _, _ = socket.recv_fds(sock, 1 << 16, _JOB_FDS)
        except (OSError, ValueError):
            os._exit(0)
        if not data:
            os._exit(0)
        try:
            request = json.loads(data)
            if len(fds) != _JOB_FDS:
                raise ValueError(f"{len(fds)} fds, not {_JOB_FDS}")
        except ValueError as exc:
            for fd in fds:
                os.close(fd)
            sock.sendall(json.dumps({"error": f"bad request: {exc}"}).encode())
            continue
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            sock.close()
            _child(request, fds, main)  # never returns
        for fd in fds:
            os.close(fd)
        sock.sendall(json.dumps({"pid": pid}).encode())


def _child(request: dict, fds: list[int], main: Callable[[], None]) -> None:
    """Outside the sandbox's pid namespace: join the sandbox, fork the job, report its exit
    status to the holder (whose exit is then bubblewrap's, as the parent sees it)."""
    code = 1
    status = fds[4]
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        libc = ctypes.CDLL(None, use_errno=True)
        zygote = os.getppid()
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != zygote:
            os._exit(1)
        try:
            _join(libc, int(request["sandbox_pid"]), int(request["holder_pid"]))
        except OSError as exc:  # the kernel's word goes to the parent, which runs the job fresh
            os.write(fds[5], f"refused: {exc}"[:300].encode())
            raise
        # A session of its own, as bubblewrap's --new-session gives; the job is a member, not
        # its leader, as a worker under bubblewrap's init is.
        os.setsid()
        job = os.fork()
        if job == 0:
            _job(libc, request, fds, main)  # never returns
        for fd in fds[:4] + fds[5:]:
            os.close(fd)
        _, wait_status = os.waitpid(job, 0)
        code = os.waitstatus_to_exitcode(wait_status)
        code = 128 - code if code < 0 else code  # killed by a signal: the shell's 128 + n
    except BaseException:
        code = 1
    finally:
        try:
            os.write(status, f"{code}\n".encode())
        except OSError:
            pass
        os._exit(0)


def _join(libc: ctypes.CDLL, sandbox_pid: int, holder_pid: int) -> None:
    """Join every namespace of the sandbox whose init is `sandbox_pid`, a child of bubblewrap
    (`holder_pid`). The pidfd pins the process: checked after it is opened, a reused pid
    cannot stand in for the sandbox."""
    pidfd = os.pidfd_open(sandbox_pid)
    try:
        with open(f"/proc/{sandbox_pid}/status") as handle:
            parent = next((line.split()[1] for line in handle if line.startswith("PPid:")), "")
        if parent != str(holder_pid):
            raise OSError(f"pid {sandbox_pid} is not the sandbox of bubblewrap {holder_pid}")
        if libc.setns(pidfd, _NAMESPACES) != 0:
            raise OSError(ctypes.get_errno(), "setns")
    finally:
        os.close(pidfd)


def _job(libc: ctypes.CDLL, request: dict, fds: list[int], main: Callable[[], None]) -> None:
    """In the sandbox: the job's process before `worker.main()`. Any failure ends it before
    job code runs (no acknowledgement: the parent starts the job classically instead)."""
    try:
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != 0:  # the parent (outside this pid namespace, so 0) died before the call
            os._exit(1)
        ack = _take_fds(fds)
        os.chdir(request["workdir"])
        os.environ.clear()
        os.environ.update({str(k): str(v) for k, v in request["env"].items()})
        os.environ["PWD"] = request["workdir"]  # as bubblewrap's --chdir sets it
        threads = os.environ.get("OMP_NUM_THREADS", "")
        if threads.isdigit() and int(threads) > 0:  # OpenMP read its variables in the zygote
            import torch

            torch.set_num_threads(int(threads))
        _drop_capabilities(libc)
        os.write(ack, b"joined")
        os.close(ack)
        sys.argv = [sys.argv[0], "3"]
    except BaseException:
        os._exit(1)
    os._exit(_as_interpreter(main))


def _as_interpreter(main: Callable[[], None]) -> int:
    """Run `main` and end as the interpreter would have: a SystemExit's message or an
    exception's traceback on stderr, and its exit status."""
    import traceback

    code = 0
    try:
        main()
    except SystemExit as exc:
        if isinstance(exc.code, int) or exc.code is None:
            code = exc.code or 0
        else:
            print(exc.code, file=sys.stderr)
            code = 1
    except BaseException:
        traceback.print_exc()
        code = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    return code


def _take_fds(fds: list[int]) -> int:
    """The job's pipes become 0-3 (stdin, stdout, stderr, the result pipe), the
    acknowledgement pipe 4; every other fd of the zygote is closed. Returns 4."""
    high = [os.dup(fd) for fd in fds]  # above every target, so no dup2 overwrites a source
    for fd in fds:
        os.close(fd)
    stdin, stdout, stderr, result, status, ack = high
    os.close(status)  # the job never writes its own exit status
    for target, fd in enumerate((stdin, stdout, stderr, result, ack)):
        os.dup2(fd, target, inheritable=target < 3)
    os.closerange(5, _max_fd())
    return 4


def _max_fd() -> int:
    try:
        return max(int(name) for name in os.listdir("/proc/self/fd")) + 1
    except (OSError, ValueError):
        return os.sysconf("SC_OPEN_MAX")


def _drop_capabilities(libc: ctypes.CDLL) -> None:
    """What bubblewrap's --cap-drop ALL leaves: no capability in any set, the bounding set
    empty, and no_new_privs. Raises when any step fails."""
    try:
        with open("/proc/sys/kernel/cap_last_cap") as handle:
            last = int(handle.read())
    except (OSError, ValueError):
        last = 63
    for cap in range(last + 1):
        if libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() != 22:  # EINVAL: no such cap
            raise OSError(ctypes.get_errno(), f"PR_CAPBSET_DROP {cap}")
    libc.prctl(_PR_CAP_AMBIENT, 4, 0, 0, 0)  # PR_CAP_AMBIENT_CLEAR_ALL (absent on old kernels)
    header = _CapHeader(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3
    data = (_CapData * 2)()
    if libc.capset(ctypes.byref(header), data) != 0:
        raise OSError(ctypes.get_errno(), "capset")
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "PR_SET_NO_NEW_PRIVS")
    with open("/proc/self/status") as handle:
        caps = {k: v.strip() for k, v in (line.split(":", 1) for line in handle if line.startswith("Cap"))}
    if any(int(value, 16) for value in caps.values()):
        raise OSError(f"capabilities left after the drop: {caps}")
