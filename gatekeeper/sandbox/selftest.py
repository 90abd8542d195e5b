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
