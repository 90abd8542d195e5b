"""Tiny jobs that exercise the sandbox itself (used by tests and the benchmark)."""

from __future__ import annotations

import os
from typing import Any


def echo(params: dict[str, Any], channel: Any) -> None:
    channel.phase("work")
    channel.send("echo", value=params.get("value"), data=params.get("data", b""), cwd=os.getcwd(),
                 env=sorted(os.environ))


def run_code(params: dict[str, Any], channel: Any) -> None:
    """Runs untrusted-style code given as text (stands in for a submission in tests)."""
    channel.phase("import")
    namespace: dict[str, Any] = {}
    exec(compile(params["code"], "<untrusted>", "exec"), namespace)
    channel.phase("call")
    result = namespace.get("result")
    channel.send("result", value=result)


def run_code_then_receive(params: dict[str, Any], channel: Any) -> None:
    """Runs code, then waits for a message fed by the parent and echoes its size."""
    channel.phase("import")
    exec(compile(params["code"], "<untrusted>", "exec"), {})
    channel.phase("wait")
    message = channel.receive()
    channel.send("received", size=len(message.get("data", b"")))


def receive_tensor(params: dict[str, Any], channel: Any) -> None:
    """Receives one fed tensor (`t`) and reports the inode of its transfer file, then its sum;
    with `overwrite`, writes zeros over that file afterwards (the hand-on tests: a file the
    worker holds is its own, and nothing the parent still reads may change with it)."""
    import os

    from gatekeeper.sandbox.spill import worker_dir
    from gatekeeper.sandbox.tensors import unpack

    channel.phase("wait")
    packed = channel.receive()["t"]
    path = os.path.join(worker_dir() or "", packed["file"]["name"]) if "file" in packed else None
    inode = os.stat(path).st_ino if path else None
    total = float(unpack(packed).double().sum())
    if path and params.get("overwrite"):
        with open(path, "r+b") as handle:
            handle.write(bytes(os.path.getsize(path)))
    channel.send("got", inode=inode, total=total)


def receive_all(params: dict[str, Any], channel: Any) -> None:
    """Receives fed messages until the parent closes stdin and reports each one's `order`
    and size, in the order received (the ordering test of issue 22 item 1)."""
    channel.phase("wait")
    while True:
        message = channel.receive()
        if not message:
            break
        channel.send("got", order=message.get("order"), size=len(message.get("data", b"")))


def send_from_threads(params: dict[str, Any], channel: Any) -> None:
    """Several threads send at once, small frames and large ones (the channel keeps each whole)."""
    import threading

    channel.phase("work")
    sizes = params.get("sizes", [8])

    def run(thread: int) -> None:
        for i in range(int(params.get("each", 1))):
            channel.send("from-thread", thread=thread, i=i, data=b"\x5a" * sizes[i % len(sizes)])

    threads = [threading.Thread(target=run, args=(t,)) for t in range(int(params.get("threads", 2)))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    channel.send("sent")


def describe_sandbox(params: dict[str, Any], channel: Any) -> None:
    """What a job sees of its sandbox (tests/test_warm_worker.py compares a warm job's view
    with a freshly started worker's)."""
    import socket
    import sys

    channel.phase("work")
    with open("/proc/self/mountinfo") as handle:
        # mount point and its read-only flag; the ids and sources differ between sandboxes
        mounts = sorted((f.split()[4], "ro" in f.split()[5].split(",")) for f in handle)
    with open("/proc/self/status") as handle:
        status = {k: v.strip() for k, v in (line.split(":", 1) for line in handle if ":" in line)}
    try:
        socket.create_connection(("192.0.2.1", 80), timeout=2).close()
        network = "reached"
    except OSError as exc:
        network = type(exc).__name__
    try:
        with open(os.path.join(params["outside"], "written-from-the-job"), "w") as handle:
            handle.write("x")
        outside = "written"
    except OSError as exc:
        outside = type(exc).__name__
    torch_loaded = "torch" in sys.modules
    import torch

    channel.send("view", threads=torch.get_num_threads(), mounts=mounts, caps={k: v for k, v in status.items() if k.startswith("Cap")},
                 no_new_privs=status.get("NoNewPrivs"), uid=os.getuid(), gid=os.getgid(), euid=os.geteuid(),
                 hostname=socket.gethostname(), cwd=os.getcwd(), env=dict(os.environ), argv0=sys.argv[0],
                 main=getattr(sys.modules.get("__main__"), "__file__", None), sys_path=list(sys.path),
                 session_leader=os.getsid(0) == os.getpid(), fds=sorted(int(f) for f in os.listdir("/proc/self/fd")),
                 processes=sorted(int(p) for p in os.listdir("/proc") if p.isdigit()), network=network,
                 outside=outside, torch_loaded=torch_loaded, namespaces={
                     name: os.readlink(f"/proc/self/ns/{name}") for name in ("user", "mnt", "pid", "net", "ipc", "uts")})


def cuda_after_fork(params: dict[str, Any], channel: Any) -> None:
    """Initialises CUDA and runs a kernel (a warm job does it after the zygote's fork; the
    zygote itself must never have touched CUDA)."""
    import torch

    channel.phase("work")
    before = torch.cuda.is_initialized()
    x = torch.arange(1 << 10, device="cuda", dtype=torch.float32)
    channel.send("cuda", initialized_before=before, total=float((x * 2).sum().item()),
                 device=torch.cuda.get_device_name(0))
