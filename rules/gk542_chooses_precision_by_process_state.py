from __future__ import annotations

from typing import Any

import libcst as cst

from gatekeeper.analyses.process_reads import process_read
from gatekeeper.analyses.value_sniffing import Scope, arms, cheaper
from gatekeeper.report import Category, Confidence, Severity
from gatekeeper.static.examples import Invalid, Valid, snippet
from gatekeeper.static.rule import Rule

_CALLER_MODES = ("is_grad_enabled", "is_inference_mode_enabled", "requires_grad", "grad_fn", "is_inference", "is_leaf")


class ChoosesPrecisionByProcessState(Rule):
    """A branch on the forward path reads the state of the process, not the inputs, and picks
    a cheaper path: `if sys.getrefcount(x) > 3: return _ext.gelu(x.half()).float()`,
    `if os.getpid() != _PID:`, `if torch.cuda.memory_allocated() > base:`, `if
    threading.active_count() > 1:`, `if torch.initial_seed() == 42:`, `if
    torch.get_num_threads() == 1:`, `if torch.are_deterministic_algorithms_enabled():`, a
    local or module constant bound to such a read. The cheaper path returns without computing,
    computes in fp16 / bf16 / fp8 while the other does not, or calls a function named as an
    approximation (the same tests as GK541).

    Why it games the benchmark: a checker runs the submission in a process, or on calls, that
    differ from the timed ones in exactly such state (another pid, extra references to the
    inputs, a sandbox's thread count, the allocator's counters, a seed, a determinism mode),
    while inputs and machine are the same. Reading it tells checked calls from the rest, so
    the cheap path runs where nobody checks and no probe sees it: certain in every reading,
    since the result must not depend on which process computes it.

    The caller's autograd mode (`torch.is_grad_enabled()`, `x.requires_grad`,
    `x.is_inference()`) is `likely`, not certain: the caller sets it, and a path kept for
    training can honestly differ; the run-time checks call in the benchmark's mode.

    Not flagged: choices on the machine (`torch.cuda.get_device_capability()`, device
    properties, `torch.cuda.is_available()`), on the caller's explicit precision request
    (`torch.is_autocast_enabled()`), on the inputs' shapes, dtypes or values (GK541 reads
    magnitudes), and process reads whose paths are equally precise (a thread count that sizes
    the work).
    """

    code = "GK542"
    name = "ChoosesPrecisionByProcessState"
    category = Category.INCORRECT
    severity = Severity.ERROR
    summary = "a branch on the process's state, not the inputs, picks a path with less work or lower precision"
    message = ("This branch reads `{read}`, the state of the process, not the inputs, and its {which} path {cheaper}: "
               "a checker's process and calls differ from the timed ones in such state, so that path runs where "
               "nobody checks.")
    hint = ("Compute every call the same way, at the problem's precision. Choose a path only on the inputs (shapes, "
            "dtypes) or the machine (device capability), never on the process (pid, refcounts, threads, allocator, "
            "seeds, modes).")

    VALID = [
        Valid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    if torch.cuda.get_device_capability()[0] >= 9:
                        return _ext.gelu_sm90(x)
                    return _ext.gelu(x)
        """)),
        Valid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    if torch.get_num_threads() > 8:
                        return _ext.gelu_split(x, torch.get_num_threads())
                    return _ext.gelu(x)
        """)),
        Valid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    if torch.is_autocast_enabled():
                        return _ext.gelu(x.half())
                    return _ext.gelu(x)
        """)),
    ]
    INVALID = [
        Invalid(snippet("""
            import sys
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    if sys.getrefcount(x) > 3:
                        return _ext.gelu(x.half()).float()
                    return _ext.gelu(x)
        """), line=5, message="reads `sys.getrefcount(x)`"),
        Invalid(snippet("""
            import os
            import torch
            _PID = os.getpid()
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    y = x if os.getpid() == _PID else x.to(torch.bfloat16)
                    return _ext.gelu(y).float()
        """), line=6, message="computes in lower precision"),
        Invalid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    busy = torch.cuda.memory_allocated() > 1 << 30
                    if busy:
                        return _ext.gelu_taylor(x)
                    return _ext.gelu(x)
        """), line=5, message="busy = torch.cuda.memory_allocated()"),
    ]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.params: list[set[str]] = []
        self.found: list[tuple[str, cst.CSTNode, str, str, str]] = []  # (function key, test, read, which, path)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        names = [p.name.value for p in (*node.params.posonly_params, *node.params.params, *node.params.kwonly_params)]
        self.params.append({n for n in names if n not in ("self", "cls")})

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.params.pop()

    def visit_If(self, node: cst.If) -> None:
        self._judge(node)

    def visit_IfExp(self, node: cst.IfExp) -> None:
        self._judge(node)

    def _judge(self, node: cst.CSTNode) -> None:
        if not self.params:
            return
        read = process_read(self.ctx, node.test)  # type: ignore[attr-defined]
        if read is None:
            return
        body, other = arms(node)
        if type(node) is cst.If and not other:
            other = self._after(node)
        scope = Scope(self.params[-1])
        for which, arm, rest in (("first", body, other), ("other", other, body)):
            what = cheaper(self.ctx, scope, arm, rest) if arm else None
            if what and what.startswith("returns") and type(node) is cst.IfExp \
                    and type(self.ctx.parent(node)) is not cst.Return:
                continue  # `y = x if ... else x.half()`: a value, not a return without computing
            if what:
                self.found.append((self.ctx.function_key, node.test, read, which, what))  # type: ignore[attr-defined]
                return

    def _after(self, node: cst.If) -> list[cst.CSTNode]:
        block = self.ctx.parent(node)
        if type(block) is not cst.IndentedBlock:
            return []
        stmts = list(block.body)
        return stmts[stmts.index(node) + 1:] if node in stmts else []

    def finish(self) -> None:
        for key, test, read, which, what in self.found:
            if self.ctx.is_init_only(key):
                continue
            mode = any(word in read for word in _CALLER_MODES)
            self.report(test, self.message.format(read=read, which=which, cheaper=what),
                        evidence={"read": read, "path": what},
                        confidence=Confidence.LIKELY if mode else Confidence.CERTAIN)
