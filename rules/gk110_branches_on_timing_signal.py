from __future__ import annotations

import libcst as cst

from gatekeeper.analyses.guard_blocks import harmless_guard, once_block
from gatekeeper.report import Category, Confidence, Severity
from gatekeeper.static.rule import Rule
from gatekeeper.static.walk import subtree
from gatekeeper.static.examples import Invalid, Valid, snippet

# Signals a submission can read to guess that it is being checked or timed.
_SIGNALS = {
    "torch.cuda.is_current_stream_capturing": "whether a CUDA graph is being captured",
    "torch.cuda.graphs.is_current_stream_capturing": "whether a CUDA graph is being captured",
    "torch._C._cuda_isCurrentStreamCapturing": "whether a CUDA graph is being captured",
    "sys.argv": "the command line of the harness",
    "sys.orig_argv": "the command line of the harness",
    "os.environ": "environment variables",
    "os.getenv": "environment variables",
    "os.environb": "environment variables",
    "sys._getframe": "the caller's stack",
    "inspect.stack": "the caller's stack",
    "inspect.currentframe": "the caller's stack",
    "traceback.extract_stack": "the caller's stack",
    "torch.is_grad_enabled": None,  # common and honest; listed so it is never flagged
    # The timing process loads the reference: its `Model` among nn.Module's subclasses.
    "torch.nn.Module.__subclasses__": "which nn.Module classes the process has loaded (the harness's reference)",
    "torch.nn.modules.module.Module.__subclasses__": "which nn.Module classes the process has loaded (the harness's reference)",
}

# Fixed for the life of the process: read once (a lazy build) they are configuration. The
# capture state and the caller's stack change from call to call and stay signals anywhere.
_PER_PROCESS = frozenset({"os.environ", "os.getenv", "os.environb", "sys.argv", "sys.orig_argv"})
# Signals with an honest use in a per-call branch (a capture-safe path without host syncs, a
# debug switch): likely, until the timed output check (GK703) sees a timed call differ. The
# caller's stack and the process's loaded classes identify the harness and nothing else:
# certain.
_DUAL_USE = _PER_PROCESS | {"torch.cuda.is_current_stream_capturing", "torch.cuda.graphs.is_current_stream_capturing",
                            "torch._C._cuda_isCurrentStreamCapturing"}


class BranchesOnTimingSignal(Rule):
    """A condition in the forward path reads something that tells a checking run from a
    timing run: `torch.cuda.is_current_stream_capturing()`, `sys.argv`, environment
    variables, or the caller's stack.

    Why it games the benchmark: the submission can return correct results while checked and
    take a cheaper (wrong) path while timed or graph-captured. Reads of these at import time
    or in `__init__` (configuration) are not flagged; only conditions in code that runs per
    call are.

    A predicate helper that returns such a read (`def _timed(): return any(c.__name__ ==
    "Model" for c in nn.Module.__subclasses__())`) tested in a branch counts as the read, and
    so does handing such a read to a call on the forward path (`_ext.f(x, _timed())`): the
    branch is then in the callee, often C++.

    Confidence: `likely` for the capture state, the environment and the command line, which
    honest code also branches on per call (a capture-safe path that skips a host sync, a debug
    switch); under `default` it is held until the timed output check (GK703) sees a timed
    call's output differ. `certain` for the caller's stack and the process's loaded classes,
    which identify the harness and nothing else.

    Known false-positive patterns it does not fire on, and why: `os.environ` read at import,
    in `__init__` or once in a lazy build (`if _EXT is None: ... _EXT = load_inline(...)`: a
    debug or build switch decided once per process); a capture guard without `else` whose body
    only syncs, sets its own latch and repeats the launch that follows it (whichever way it
    goes, the call computes the same; guard_blocks.py); helpers reached only from
    `get_inputs`/`__init__` (not on the forward path); `torch.is_grad_enabled()` (honest
    autograd handling, not a harness signal).
    """

    code = "GK110"
    name = "BranchesOnTimingSignal"
    category = Category.CACHED_OUTPUT
    severity = Severity.ERROR
    confirmed_by = "GK703"  # the timed output check: a timed call's output against the reference's
    summary = "forward branches on a signal that tells checking from timing"
    message = "This condition reads {what} (`{name}`) in forward, so the submission can behave differently when it is timed than when it is checked."
    handed = ("`{callee}()` reads {what} (`{name}`) and its result is handed to a call in forward, so the "
              "submission can behave differently when it is timed than when it is checked.")
    hint = "Take the same path on every call; decide configuration once in `__init__` from the inputs' properties, never from the harness's state."

    VALID = [
        Valid(snippet("""
            import os, torch
            DEBUG = os.environ.get('MY_DEBUG') == '1'
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    return run(x)
        """)),
        # a capture guard: keeps the first call's JIT warm-up and sync out of a caller's graph
        # capture; the body only repeats the launch that follows, syncs and sets its own latch
        Valid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    y = torch.empty_like(x)
                    if not self.compiled and not torch.cuda.is_current_stream_capturing():
                        _launch(x, y)
                        torch.cuda.synchronize()
                        self.compiled = True
                    _launch(x, y)
                    return y
        """)),
        # the environment read once, inside the lazy build (to pick the target arch)
        Valid(snippet("""
            import os, torch
            _EXT = None
            def _ext():
                global _EXT
                if _EXT is None:
                    if 'TORCH_CUDA_ARCH_LIST' not in os.environ:
                        os.environ['TORCH_CUDA_ARCH_LIST'] = '9.0'
                    _EXT = build()
                return _EXT
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    return _ext().f(x)
        """)),
    ]
    INVALID = [
        # a guard whose latch another branch reads carries the signal on
        Invalid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    if torch.cuda.is_current_stream_capturing():
                        self.timed = True
                    if self.timed:
                        return cheap(x)
                    return run(x)
        """), line=4, message="This condition reads whether a CUDA graph is being captured"),
        # read on every call (not once) and the body computes
        Invalid(snippet("""
            import os, torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    y = run(x)
                    if os.environ.get('BENCH') is None:
                        y = exact(x)
                    return y
        """), line=5, message="This condition reads environment variables"),
        Invalid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    if torch.cuda.is_current_stream_capturing():
                        return self.out
                    return run(x)
        """), line=4, message="This condition reads whether a CUDA graph is being captured"),
        Invalid(snippet("""
            import sys, torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    if 'bench' in ' '.join(sys.argv):
                        return cheap(x)
                    return run(x)
        """), line=4, message="This condition reads the command line of the harness (`sys.argv`) in forward"),
        Invalid(snippet("""
            from os import getenv as ge
            import torch
            def forward(x):
                return cheap(x) if ge('TIMING') else run(x)
        """), line=4, message="This condition reads environment variables (`os.getenv`) in forward"),
        # the reference class loaded in the process, read through a predicate helper
        Invalid(snippet("""
            import torch
            import torch.nn as nn
            def _timed():
                return any(c.__name__ == 'Model' for c in nn.Module.__subclasses__())
            class ModelNew(nn.Module):
                def forward(self, x):
                    if _timed():
                        return self.memo
                    return run(x)
        """), line=7, message="This condition reads which nn.Module classes the process has loaded (the harness's reference)"),
        Invalid(snippet("""
            import torch
            import torch.nn as nn
            def _timed():
                return any(c.__name__ == 'Model' for c in nn.Module.__subclasses__())
            class ModelNew(nn.Module):
                def forward(self, x):
                    return _ext.f(x, _timed())
        """), line=7, message="`_timed()` reads which nn.Module classes the process has loaded (the harness's reference)"),
    ]

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.hits: list[tuple[str, cst.CSTNode, str, cst.CSTNode]] = []  # (function key, read, signal, statement)
        self.helpers: dict[str, str] = {}  # function name -> signal its return value reads
        self.calls: list[tuple[str, cst.Call, str, bool]] = []  # (function key, call, callee, in a branch test)

    def visit_Call(self, node: cst.Call) -> None:
        # `_ext.f(x, _being_timed())`: the signal handed to code that branches on it
        if not self.ctx.functions:
            return
        for arg in node.args:
            value = arg.value
            if type(value) is cst.Call and type(value.func) is cst.Name:
                self.calls.append((self.ctx.function_key, value, value.func.value, False))

    def visit_Return(self, node: cst.Return) -> None:
        if self.ctx.functions and node.value is not None:
            signal = self._signal_in(node.value)
            if signal:
                self.helpers[self.ctx.functions[-1].name.value] = signal

    def visit_If(self, node: cst.If) -> None:
        self._scan(node.test, node)

    def visit_IfExp(self, node: cst.IfExp) -> None:
        self._scan(node.test, node)

    def visit_While(self, node: cst.While) -> None:
        self._scan(node.test, node)

    def _scan(self, test: cst.BaseExpression, statement: cst.CSTNode) -> None:
        if not self.ctx.functions:
            return
        key = self.ctx.function_key
        for current in subtree(test):
            if type(current) in (cst.Name, cst.Attribute):
                name = self.ctx.qualname(current)
                if name and _SIGNALS.get(name):
                    self.hits.append((key, current, name, statement))
                    return
            if type(current) is cst.Call:
                func = current.func
                callee = func.value if (type(func) is cst.Name) else func.attr.value if (type(func) is cst.Attribute) else None
                if callee:
                    self.calls.append((key, current, callee, True))

    def _signal_in(self, expr: cst.BaseExpression) -> str | None:
        for current in subtree(expr):
            if type(current) in (cst.Name, cst.Attribute):
                name = self.ctx.qualname(current)
                if name and _SIGNALS.get(name):
                    return name
        return None

    def finish(self) -> None:
        reported: set[int] = set()
        for key, node, callee, in_test in self.calls:
            if callee not in self.helpers or id(node) in reported or self.ctx.is_init_only(key):
                continue
            reported.add(id(node))
            name = self.helpers[callee]
            message = self.message.format(what=_SIGNALS[name], name=name) if in_test else self.handed.format(
                callee=callee, what=_SIGNALS[name], name=name)
            self.report(node, message, evidence={"signal": name, "through": callee}, confidence=_confidence(name))
        for key, node, name, statement in self.hits:
            # read once (a lazy build's first call), or a guard whose body cannot change the
            # result (a capture guard that keeps a warm-up sync out of a caller's capture)
            if self.ctx.is_init_only(key) or harmless_guard(self.ctx, statement):
                continue
            if name in _PER_PROCESS and once_block(self.ctx, statement):
                continue  # the environment and argv are fixed per process: a first-call read is an import-time read
            self.report(node, self.message.format(what=_SIGNALS[name], name=name), evidence={"signal": name},
                        confidence=_confidence(name))


def _confidence(signal: str) -> Confidence:
    return Confidence.LIKELY if signal in _DUAL_USE else Confidence.CERTAIN
