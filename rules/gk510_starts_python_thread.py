from __future__ import annotations

from typing import Optional

import libcst as cst

from gatekeeper.report import Category, Severity
from gatekeeper.static.rule import Rule
from gatekeeper.static.examples import Invalid, Valid, snippet

# Calling (or subclassing, or handing on) any of these starts a thread or a process.
STARTERS = frozenset({
    "threading.Thread", "threading.Timer", "_thread.start_new_thread", "_thread.start_new",
    "thread.start_new_thread", "os.fork", "os.forkpty", "pty.fork", "asyncio.to_thread",
    "concurrent.futures.ThreadPoolExecutor", "concurrent.futures.ProcessPoolExecutor",
    "concurrent.futures.thread.ThreadPoolExecutor", "concurrent.futures.process.ProcessPoolExecutor",
    "concurrent.futures.InterpreterPoolExecutor", "multiprocessing.pool.ThreadPool",
    "torch.jit.fork", "torch.jit._fork", "torch._C._jit_fork", "joblib.Parallel",
    # not threads, but the same escape: a timer signal runs Python code after the call returned
    "signal.setitimer", "signal.alarm",
})
# Everything under these packages starts workers, except the harmless queries listed.
PACKAGES = ("multiprocessing.", "torch.multiprocessing.", "billiard.")
HARMLESS = frozenset({"cpu_count", "current_process", "parent_process", "active_children",
                      "get_start_method", "get_all_start_methods", "Lock", "RLock", "Value", "Array",
                      "SharedMemory", "ShareableList"})


# Last components worth resolving when a starter is handed on as an argument (cheap filter).
_LEAVES = frozenset({q.rsplit(".", 1)[-1] for q in STARTERS} | {"Process", "Pool", "spawn", "get_context",
                                                                  "start_processes", "SimpleQueue", "Manager"})


class StartsPythonThread(Rule):
    """The submission starts a thread or a process: `threading.Thread` / `Timer` (also
    subclassed), `_thread.start_new_thread`, `multiprocessing` and `torch.multiprocessing`
    (Process, Pool, spawn, get_context...), `concurrent.futures` executors, `os.fork`,
    `asyncio.to_thread` and `loop.run_in_executor`, `torch.jit.fork`, and timer signals
    (`signal.setitimer`, `signal.alarm`) whose handler runs later. Names are resolved
    through imports and aliases, so `from threading import Thread as T` is seen.

    Why it games the benchmark: a background worker can finish (or start) the computation
    after `forward` has returned, outside the timed region and after the harness looked at
    the output; or it can watch the harness and rewrite results behind its back. A kernel
    submission has no honest use for one: torch launches are asynchronous already.

    An executor or pool opened by a `with` block outside the model's call (`with
    ThreadPoolExecutor() as pool:` at import, to build two extensions in parallel) is a
    warning only: leaving the block waits for (or ends) every worker, so none is alive when
    `forward` runs. Inside the call it stays an error: other threads or processes do work
    there that the attribution of this one may not see.

    Not flagged: `threading.Lock` and other synchronisation objects, `multiprocessing.cpu_count()`,
    `torch.set_num_threads`, and any name that merely looks like these (a local `Thread`
    class, a method called `start`).
    """

    code = "GK510"
    name = "StartsPythonThread"
    category = Category.THREAD_INJECTION
    severity = Severity.ERROR
    summary = "starts a Python thread, process or executor"
    message = (
        "`{name}` starts a thread or a process: work done there can finish after `forward` returns, "
        "outside the timed region and after the output was checked, or tamper with the harness while it runs."
    )
    hint = (
        "Do the work synchronously inside `forward`: launch your kernels on the current stream and "
        "return the output tensor. Remove threads, executors, `multiprocessing` and `os.fork`."
    )
    VALID = [
        Valid(snippet("""
            import threading
            import multiprocessing as mp
            _lock = threading.Lock()
            _workers = mp.cpu_count()
            class ModelNew:
                def forward(self, x):
                    assert not isinstance(x, threading.Thread)
                    with _lock:
                        return _ext.run(x)
        """)),
        # a local class and method names that only look like threads
        Valid(snippet("""
            class Thread:
                def start(self):
                    return 1
            def run():
                t = Thread()
                return t.start()
        """)),
    ]
    INVALID = [
        Invalid(snippet("""
            import threading
            def forward(x, out):
                threading.Thread(target=_ext.run, args=(x, out)).start()
                return out
        """), line=3, message="`threading.Thread` starts a thread or a process"),
        Invalid(snippet("""
            from concurrent.futures import ThreadPoolExecutor as Pool
            _pool = Pool(1)
            def forward(x):
                return _pool.submit(_ext.run, x)
        """), line=2, message="`concurrent.futures.ThreadPoolExecutor` starts a thread or a process"),
        Invalid(snippet("""
            import torch.multiprocessing as tmp
            def forward(x):
                p = tmp.Process(target=_ext.run, args=(x,))
                p.start()
        """), line=3, message="`torch.multiprocessing.Process` starts a thread or a process"),
        Invalid(snippet("""
            from threading import Thread
            class Finisher(Thread):
                def run(self):
                    _ext.finish()
        """), line=2, message="`threading.Thread` starts a thread or a process"),
        Invalid(snippet("""
            import asyncio
            async def forward(x):
                loop = asyncio.get_running_loop()
                return await loop.run_in_executor(None, _ext.run, x)
        """), line=4, message="`run_in_executor` starts a thread or a process"),
        Invalid(snippet("""
            import os
            def forward(x):
                if os.fork() == 0:
                    _ext.run(x)
                    os._exit(0)
                return x
        """), line=3, message="`os.fork` starts a thread or a process"),
    ]

    scoped_note = (" Here a `with` block outside the model's call opens it, and leaving the block waits for or "
                   "ends every worker, so nothing it started is alive in `forward`: a warning only.")

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._scoped: list[tuple[cst.Call, str, str]] = []

    def _starter(self, expr: cst.BaseExpression) -> Optional[str]:
        qual = self.ctx.qualname(expr)
        if qual is None:
            return None
        if qual in STARTERS:
            return qual
        for package in PACKAGES:
            if qual.startswith(package) and qual.rsplit(".", 1)[-1] not in HARMLESS:
                return qual
        return None

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if type(func) is cst.Attribute and func.attr.value == "run_in_executor":
            self.report(node, self.message.format(name="run_in_executor"), evidence={"starts": "run_in_executor"})
            return
        name = self._starter(func)
        if name is not None:
            if type(self.ctx.parent(node)) is cst.WithItem and name.rsplit(".", 1)[-1] in _SCOPED:
                self._scoped.append((node, name, self.ctx.function_key))  # judged once the call graph is whole
                return
            self.report(node, self.message.format(name=name), evidence={"starts": name})
            return
        # handed on rather than called: functools.partial(threading.Thread, ...), pool.map(Process, ...)
        if type(func) is cst.Name and func.value in ("isinstance", "issubclass", "type", "hasattr", "print"):
            return
        for arg in node.args:
            value = arg.value
            if type(value) is cst.Name or (type(value) is cst.Attribute and value.attr.value in _LEAVES):
                name = self._starter(arg.value)
                if name is not None:
                    self.report(arg, self.message.format(name=name), evidence={"starts": name})

    def finish(self) -> None:
        for node, name, key in self._scoped:
            if self.ctx.is_init_only(key):
                # outside the model's call, and the block's exit joins (executors) or ends
                # (pools) every worker it started: nothing is alive when forward runs
                self.report(node, self.message.format(name=name) + self.scoped_note,
                            evidence={"starts": name, "joined": "when the with block ends"},
                            severity=Severity.WARNING)
            else:  # in the call: other processes do work no attribution of this one sees
                self.report(node, self.message.format(name=name), evidence={"starts": name})

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        for base in node.bases:
            name = self._starter(base.value)
            if name is not None:
                self.report(base, self.message.format(name=name) + f" (`{node.name.value}` subclasses it)",
                            evidence={"starts": name, "class": node.name.value})


# Opened by a `with` block, these wait for (executors) or end (pools) every worker on exit.
_SCOPED = frozenset({"ThreadPoolExecutor", "ProcessPoolExecutor", "Pool", "ThreadPool"})
