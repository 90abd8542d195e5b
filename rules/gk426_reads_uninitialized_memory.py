from __future__ import annotations

from typing import Optional

import libcst as cst

from gatekeeper.report import Category, Confidence, Severity
from gatekeeper.static.rule import Rule
from gatekeeper.static.walk import subtree
from gatekeeper.static.examples import Invalid, Valid, snippet

# Allocations whose values are whatever the allocator hands back.
_UNINITIALISED = frozenset({"torch.empty", "torch.empty_like", "torch.empty_strided"})
_UNINITIALISED_METHODS = frozenset({"new_empty", "new_empty_strided"})
# Reads that bring a tensor's values to Python.
_VALUE_READS = frozenset({"item", "tolist", "numpy", "any", "all"})
_CONVERSIONS = frozenset({"builtins.int", "builtins.float", "builtins.bool"})


class ReadsUninitializedMemory(Rule):
    """Reads the values of a fresh uninitialised allocation before anything writes it:
    `torch.empty(1, dtype=torch.int32).item() == 2**31 - 1`, `bool(torch.empty(4)[0])`, or a
    local bound to `torch.empty(...)` whose only use is such a read.

    Why it games the benchmark: the values of `torch.empty` are whatever the allocator hands
    back, unless a checker fills uninitialised memory to expose outputs a kernel never wrote
    (`torch.utils.deterministic.fill_uninitialized_memory`, NaN poisoning). Reading them tells
    a checked call from a timed one, and nothing else: red team round 9 ran an IEEE GEMM while
    the memory came back filled and TF32 otherwise.

    Confidence: certain. No honest computation reads memory it never wrote.

    Not flagged: an allocation a kernel, a copy or an in-place op writes before it is read
    (the local is used more than once), `torch.zeros` / `torch.full` (their values are set),
    and reading shapes or dtypes of an empty tensor (`torch.empty(0).dtype`).
    """

    code = "GK426"
    name = "ReadsUninitializedMemory"
    category = Category.INTROSPECTION
    severity = Severity.ERROR
    confidence = Confidence.CERTAIN
    confirmed_by = "GK676"
    summary = "reads the values of an uninitialised allocation (a probe for a checker's memory poisoning)"
    message = ("`{expr}` reads the values of `{alloc}`, which nothing wrote: they are garbage unless a checker "
               "fills uninitialised memory, so the read can only tell a checked call from a timed one.")
    hint = ("Remove the read. Nothing about the checker may choose the path; if you need a constant, make it with "
            "`torch.zeros` / `torch.full`, and read an allocation only after your kernel writes it.")
    VALID = [
        Valid(snippet("""
            import torch
            def f(x):
                buf = torch.empty(1, dtype=torch.int32, device=x.device)
                _ext.count(x, buf)
                return buf.item()
        """)),
        Valid(snippet("""
            import torch
            flag = torch.zeros(1, dtype=torch.int32).item() == 0
            dtype = torch.empty(0).dtype
        """)),
    ]
    INVALID = [
        Invalid(snippet("""
            import torch
            def checked():
                return torch.empty(1, dtype=torch.int32).item() == 2**31 - 1
        """), line=3, message="reads the values of `torch.empty(...)`, which nothing wrote"),
        Invalid(snippet("""
            import torch
            def checked(x):
                probe = x.new_empty(4)
                return bool(probe[0] != probe[0])
        """), line=4, message="reads the values of `x.new_empty(...)`"),
    ]

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.seen: set[object] = set()  # allocations already reported

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        qual = self.ctx.qualname(func) or ""
        if type(func) is cst.Attribute and func.attr.value in _VALUE_READS:
            self._judge(node, func.value)
        elif qual in _CONVERSIONS and len(node.args) == 1:
            self._judge(node, node.args[0].value)

    def visit_Comparison(self, node: cst.Comparison) -> None:
        for operand in (node.left, *(c.comparator for c in node.comparisons)):
            if type(operand) is cst.Subscript:
                self._judge(node, operand)

    def _judge(self, read: cst.CSTNode, receiver: cst.BaseExpression) -> None:
        while type(receiver) is cst.Subscript:
            receiver = receiver.value
        alloc = self._fresh_allocation(receiver, read)
        # one finding per allocation: a local read twice (`p[0] != p[0]`) is one probe
        if alloc is None:
            return
        key = (id(self.ctx.functions[-1]), receiver.value) if type(receiver) is cst.Name else id(receiver)
        if key in self.seen:
            return
        self.seen.add(key)
        expr = cst.Module(body=[]).code_for_node(read)
        self.report(read, self.message.format(expr=expr if len(expr) <= 60 else expr[:57] + "...", alloc=alloc),
                    evidence={"allocation": alloc})

    def _fresh_allocation(self, expr: cst.BaseExpression, read: Optional[cst.CSTNode] = None) -> Optional[str]:
        """`torch.empty(...)` written in place, or a local bound to one and used nowhere else."""
        if type(expr) is cst.Call:
            qual = self.ctx.qualname(expr.func) or ""
            if qual in _UNINITIALISED:
                return f"{qual}(...)"
            if type(expr.func) is cst.Attribute and expr.func.attr.value in _UNINITIALISED_METHODS:
                owner = cst.Module(body=[]).code_for_node(expr.func.value)
                return f"{owner[:30]}.{expr.func.attr.value}(...)"
            return None
        if type(expr) is not cst.Name or not self.ctx.functions:
            return None
        fn = self.ctx.functions[-1]
        bound: Optional[str] = None
        uses = 0
        for sub in subtree(fn.body):
            if type(sub) is cst.Assign and len(sub.targets) == 1 and type(sub.targets[0].target) is cst.Name \
                    and sub.targets[0].target.value == expr.value:
                if bound is not None:
                    return None  # bound twice: not one fresh allocation
                bound = self._fresh_allocation(sub.value) if type(sub.value) is cst.Call else None
                if bound is None:
                    return None
                uses -= 1  # the assignment's own target
            elif type(sub) is cst.Name and sub.value == expr.value:
                uses += 1
        # every read of the local is this kind of value read (`probe[0] != probe[0]`): nothing wrote it
        return bound if bound is not None and read is not None and uses <= self._reads_in_statement(expr, read) else None

    def _reads_in_statement(self, name: cst.Name, read: cst.CSTNode) -> int:
        """How many times the statement holding the read names `name` (`probe[0] != probe[0]`:
        2). Walks up from the read, whose parents the traversal has recorded."""
        stmt: Optional[cst.CSTNode] = read
        while stmt is not None and not isinstance(stmt, cst.BaseSmallStatement):
            stmt = self.ctx.parent(stmt)
        if stmt is None:
            return 1
        return sum(1 for sub in subtree(stmt) if type(sub) is cst.Name and sub.value == name.value)
