"""Observation helpers used inside workers (reference and submission): storage ranges,
digests, thread and process counts, and identities of harness-critical functions."""

from __future__ import annotations

import builtins
import os
import threading
import time
from typing import Any, Callable

from gatekeeper.sandbox.tensors import digest

CRITICAL = (
    ("torch", "allclose"), ("torch", "equal"), ("torch", "isclose"), ("torch", "manual_seed"),
    ("torch", "randn"), ("torch", "empty"), ("torch.testing", "assert_close"),
    ("torch.cuda", "synchronize"), ("torch.cuda.Event", "elapsed_time"), ("torch.cuda.Event", "record"),
    ("torch.cuda.Event", "synchronize"), ("torch.Tensor", "__eq__"), ("torch.Tensor", "clone"),
    ("torch.Tensor", "data_ptr"), ("torch.Tensor", "cpu"), ("torch.Tensor", "contiguous"),
    ("torch.nn.Module", "__call__"), ("time", "perf_counter"), ("time", "perf_counter_ns"),
    ("time", "time"), ("time", "monotonic"), ("builtins", "isinstance"), ("builtins", "type"),
    ("builtins", "len"), ("builtins", "open"), ("builtins", "__import__"), ("builtins", "print"),
)


def _resolve(module_path: str) -> Any:
    import importlib

    parts = module_path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(module_path)


def identities() -> dict[str, int]:
    found: dict[str, int] = {}
    for owner, attr in CRITICAL:
        try:
            target = builtins if owner == "builtins" else _resolve(owner)
            found[f"{owner}.{attr}"] = id(_unwrap_torch_own(getattr(target, attr)))
        except Exception:
            found[f"{owner}.{attr}"] = -1
    return found


_DYNAMO_WRAPPER: list[Any] = []  # the code object of torch's own `_disable_dynamo` wrapper


def _unwrap_torch_own(obj: Any) -> Any:
    """What torch's own lazy set-up wrapped: importing torch._dynamo (which
    `@torch.library.custom_op`, `torch.compile` and others do) replaces `torch.manual_seed` with
    `torch._disable_dynamo(torch.manual_seed)`. Such a wrapper only calls what it wraps, so it
    counts as that function. Recognised by its code object (the very one torch makes, not a
    look-alike) and the function in its closure; anything else is itself."""
    code = getattr(obj, "__code__", None)
    if code is None or not getattr(obj, "__closure__", None):
        return obj
    if not _DYNAMO_WRAPPER:
        try:
            import torch

            _DYNAMO_WRAPPER.append(torch._disable_dynamo(_probe).__code__)  # lazy: imports nothing
        except Exception:
            _DYNAMO_WRAPPER.append(None)
    if code is not _DYNAMO_WRAPPER[0]:
        return obj
    cells = dict(zip(code.co_freevars, (c.cell_contents for c in obj.__closure__)))
    return cells.get("fn", obj)


def _probe() -> None:
    pass


def changed(before: dict[str, int], after: dict[str, int]) -> list[str]:
    return sorted(k for k, v in before.items() if after.get(k) != v)


def os_threads() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return threading.active_count()


def child_processes() -> list[int]:
    """Our live children (zombies are done and are not counted)."""
    children: list[int] = []
    try:
        for task in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{task}/children") as handle:
                children.extend(int(c) for c in handle.read().split())
    except OSError:
        pass
    return [pid for pid in children if not _zombie(pid)]


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[0] in (b"Z", b"X")
    except (OSError, IndexError):
        return True  # gone already


def visible_pids() -> frozenset[int]:
    try:
        return frozenset(int(name) for name in os.listdir("/proc") if name.isdigit())
    except OSError:
        return frozenset()


class Census:
    """Thread and child counts around one call.

    As pid 1 of its namespace (bwrap, unshare) the worker adopts every orphan there: a
    process detached at import becomes its child when its parent exits, which may happen
    during any call. Only a child that did not exist before the call (its pid was not
    visible) or was our child already is counted after it."""

    def __init__(self, before: "Census | None" = None) -> None:
        live = child_processes()
        self.visible = visible_pids()
        if before is not None:
            live = [pid for pid in live if pid in before.mine or pid not in before.visible]
        self.mine = frozenset(live)
        self.counts: dict[str, Any] = {"python_threads": threading.active_count(), "os_threads": os_threads(),
                                       "children": len(live)}


def storage_range(tensor: Any) -> tuple[int, int]:
    storage = tensor.untyped_storage()
    start = storage.data_ptr()
    return start, start + storage.nbytes()


def overlaps(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] < b[1] and b[0] < a[1] and a[0] != a[1] and b[0] != b[1]


def tensors_of(value: Any) -> list[Any]:
    import torch

    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in tensors_of(v)]
    return []


def input_digests(inputs: list[Any]) -> list[str | None]:
    import torch

    return [digest(t) if isinstance(t, torch.Tensor) else None for t in inputs]


def settle(device: str) -> None:
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()


def now() -> float:
    return time.perf_counter()


_BEFORE_IMPORT: set[int] = set()  # the pids visible before the submission loaded


def note_processes() -> None:
    """Before the submission loads: the processes that are not its doing."""
    _BEFORE_IMPORT.update(visible_pids())


def _parent(pid: int) -> int:
    """The parent pid of `pid` (-1 when it is gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return int(handle.read().rsplit(b")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return -1


def started_processes(worker_tool: Callable[[int], bool]) -> list[int]:
    """Live processes the submission started since before its import: its children, and any new
    child of the worker's own parent, a sibling made with CLONE_PARENT (red team round 6, h03e).
    The worker's parent is the sandbox's or the harness's process, which starts nothing else
    once the worker runs; a process group would also hold the processes of other checks
    running beside this one. `worker_tool(pid)` excludes torch's own helpers (TorchInductor's
    compile workers)."""
    found = set(child_processes())
    if _BEFORE_IMPORT:
        me, parent = os.getpid(), os.getppid()
        found.update(pid for pid in visible_pids() if pid not in _BEFORE_IMPORT and pid != me
                     and _parent(pid) == parent and not _zombie(pid))
    return sorted(pid for pid in found if not worker_tool(pid))
