from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import libcst as cst

from gatekeeper.report import Category, Confidence, Severity
from gatekeeper.analyses.allocation_shapes import METHOD_ALLOC, TORCH_ALLOC, allocation_shape
from gatekeeper.analyses.shape_helpers import (
    ORDERING, in_main_guard, only_raises, py_int, reach, shape_text, significant_match, sized_holder, sizes_for,
    under_size_test,
)
from gatekeeper.static.rule import Rule
from gatekeeper.static.walk import subtree
from gatekeeper.static.examples import Invalid, Valid, snippet

_P = "R = 4\nB = 16\nD = 48\ndef get_inputs():\n    return [torch.randn(R, B, D)]\n"
_HEADER = "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n"


@dataclass
class _Pending:
    node: cst.Call
    key: str
    values: list[Optional[int]]
    matched: list[tuple[int, str]]
    target: Optional[str]
    holder: Optional[str] = None  # the code of the name or attribute it is stored in


def _is_tile_like(value: int) -> bool:
    return value <= 1024 and value & (value - 1) == 0


class LiteralAllocationShape(Rule):
    """An allocation whose shape is spelled with literals: `torch.empty((16, 48))`,
    `T.zeros(16, 48, ...)` after `import torch as T`, `x.new_empty(...)`, `torch.empty(SHAPE)`
    with a module constant `SHAPE = (16, 48)`, `torch.empty([B, D])` with module constants
    `B = 16`, `D = 48`, or a local `shape = (x.size(0), 48)`.

    Why it games the benchmark: the output has the nominal shape whatever the input is, so
    the submission only works at the sizes the benchmark happens to use; a jittered input
    gets a wrong-shaped result or out-of-bounds writes.

    With the problem file, literals equal to the problem's dimensions or their products are
    an error (a warning in code that only runs at construction, such as `__init__`, and in
    functions nothing calls by name). Code under `if __name__ == "__main__":` and a pasted
    copy of the problem's `get_inputs()` build test inputs, not outputs, and are not checked. Without
    it, all-literal shapes of two or more sizes above 1 allocated for outputs on the forward
    path are a warning: the problem file would make it certain. Not flagged: sizes read from
    the inputs (`x.size(1)`, `x.shape[2]`), sizes of 0 or 1, and a one-dimensional scratch
    buffer whose length is a power of two up to 1024 (a tile count, not a shape).

    Confidence: certain for an output of forward (returned, or handed to the kernel that
    writes it) whose every size is a literal problem size, such as `torch.empty((16, 48))`;
    likely for an output with some literal sizes next to sizes read from the input;
    suspect for a scratch buffer that does not reach the output (a warning outside
    `strict`, confirmed or cleared by the behaviour stage's jittered-shape check, GK602).

    Known false-positive patterns, and why it does not fire on them:
    - `torch.randn(c_out, c_in, 3, 3)` for a problem with 3 input channels: small sizes
      (below 17) count only when two different ones match, so a 3x3 kernel is not a shape;
    - weights and buffers built in `__init__`: a warning at most (init runs at the nominal
      configuration by construction);
    - a copy of the problem's `get_inputs()` and `__main__` self-tests: not checked;
    - a pool or workspace that is never returned and whose size an `assert` (or an `if` that
      raises) compares with the run-time need (`assert self.pool.numel() >= x.shape[0] * 4`):
      a checked capacity fails loudly at other sizes, it does not compute a wrong result. A
      "capacity" never checked against the need, or only reallocated at the same literal
      size when too small, is still a finding.
    """

    code = "GK201"
    name = "LiteralAllocationShape"
    category = Category.HARDCODED_SHAPE
    severity = Severity.ERROR
    confidence = Confidence.LIKELY
    confirmed_by = "GK602"
    summary = "allocates a tensor with the problem's nominal shape written as literals"
    message = (
        "`{call}` allocates the literal shape {shape}, which spells out the problem's sizes ({why}): the result only fits the benchmark's "
        "nominal input, so any other input size gets a wrong-shaped output or out-of-bounds writes."
    )
    message_no_problem = (
        "`{call}` allocates the all-literal shape {shape} on the forward path instead of reading the sizes "
        "from the inputs; without the problem file the gatekeeper cannot tell whether these are the "
        "benchmark's nominal sizes (pass --problem to make this certain)."
    )
    hint = (
        "Allocate the output on every call from the input's sizes, e.g. "
        "`torch.empty((x.size(1), x.size(2)), device=x.device, dtype=x.dtype)` or `torch.empty_like(x)`, "
        "and pass those sizes to the kernel as arguments."
    )
    EXAMPLE_PROBLEM = _P
    VALID = [
        Valid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    y = torch.empty((x.size(1), x.size(2)), device=x.device, dtype=x.dtype)
                    k(x, y)
                    return y
        """)),
        Valid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    B, D = x.shape[1], x.shape[2]
                    y = x.new_empty((B, D))
                    k(x, y)
                    return y
        """)),
        # a scratch buffer of tile count, not a shape
        Valid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    ws = torch.zeros(256, device=x.device)
                    y = torch.empty_like(x[0])
                    k(x, ws, y)
                    return y
        """)),
        Valid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    flag = torch.zeros(1, dtype=torch.int32, device=x.device)
                    return k(x, flag)
        """)),
        # a 4x4 stencil when the problem has R = 4 ranks: one small size, not the shape
        Valid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    w = torch.ones(x.size(0), 4, 4, device=x.device)
                    return k(x, w)
        """)),
        # a counter pool whose capacity is checked against the need
        Valid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    need = x.shape[0] * 4
                    if self.pool is None or self.pool.numel() < need:
                        self.pool = torch.zeros(768, dtype=torch.int32, device=x.device)
                    assert self.pool.numel() >= need
                    y = torch.empty_like(x)
                    k(x, y, self.pool)
                    return y
        """)),
    ]
    INVALID = [
        # the same pool, never checked against the need: at a larger size the kernel overruns it
        Invalid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    if self.pool is None:
                        self.pool = torch.zeros(768, dtype=torch.int32, device=x.device)
                    y = torch.empty_like(x)
                    k(x, y, self.pool)
                    return y
        """), line=5, message="allocates the literal shape (768)"),
        # a size test that only reallocates at the same literal shape protects nothing
        Invalid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    if self._y is None or self._y.numel() < x[0].numel():
                        self._y = torch.empty((16, 48), device=x.device)
                    k(x, self._y)
                    return self._y
        """), line=5, message="allocates the literal shape (16, 48)"),
        Invalid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    y = torch.empty((16, 48), device=x.device, dtype=x.dtype)
                    k(x, y)
                    return y
        """), line=4, message="`torch.empty((16, 48), device=x.device, dtype=x.dtype)` allocates the literal shape (16, 48)"),
        Invalid(snippet("""
            import torch as T
            class ModelNew(T.nn.Module):
                def forward(self, x):
                    return k(x, T.zeros(16, 48, device=x.device))
        """), line=4, message="`T.zeros(16, 48, device=x.device)` allocates the literal shape (16, 48)"),
        Invalid(snippet("""
            import torch
            SHAPE = (16, 48)
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    y = torch.empty(SHAPE, device=x.device)
                    k(x, y)
                    return y
        """), line=5, message="`torch.empty(SHAPE, device=x.device)` allocates the literal shape (16, 48)"),
        Invalid(snippet("""
            import torch
            B = 16
            D = 48
            def _out(x):
                return x.new_empty([B, D])
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    y = _out(x)
                    k(x, y)
                    return y
        """), line=5, message="`x.new_empty([B, D])` allocates the literal shape (16, 48)"),
        Invalid(snippet("""
            import torch
            SHAPE = (16, 48)
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    return k(x, torch.zeros(*SHAPE, device=x.device))
        """), line=5, message="`torch.zeros(*SHAPE, device=x.device)` allocates the literal shape (16, 48)"),
        Invalid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    shape = (x.size(1), 48)
                    y = torch.empty(shape, device=x.device)
                    k(x, y)
                    return y
        """), line=5, message="`torch.empty(shape, device=x.device)` allocates the literal shape (?, 48)"),
    ]

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.pending: list[_Pending] = []
        self.outputs: dict[str, set[str]] = {}
        # names and attributes whose size is compared with a run-time need (`buf.numel() < n`)
        self.capacities: set[str] = set()
        self.returned: set[str] = set()  # names and attributes a return statement hands back

    def visit_Assert(self, node: cst.Assert) -> None:
        self._capacity_checks(node.test)

    def visit_If(self, node: cst.If) -> None:
        if only_raises(node.body):
            self._capacity_checks(node.test)

    def _capacity_checks(self, test: cst.BaseExpression) -> None:
        for sub in subtree(test, into_functions=False):
            if type(sub) is cst.Comparison:
                self._capacity_check(sub)

    def _capacity_check(self, node: cst.Comparison) -> None:
        """`assert self.pool.numel() >= x.shape[0] * splits` (or an `if` that raises): the
        tensor is a capacity refused when too small for this call's need, not an output
        shape. A check that only reallocates at the same literal size protects nothing."""
        left = node.left
        for target in node.comparisons:
            right = target.comparator
            if type(target.operator) in ORDERING:
                for a, b in ((left, right), (right, left)):
                    holder = sized_holder(a)
                    if holder is not None and py_int(self.ctx, b) is None:
                        self.capacities.add(self.ctx.module.code_for_node(holder))
            left = right

    # where tensors go: returned or handed to a call (a kernel that writes them)
    def visit_Return(self, node: cst.Return) -> None:
        if node.value is not None:  # `return buf` or `return out, buf`, not `return k(buf)`
            values = [e.value for e in node.value.elements] if type(node.value) in (cst.Tuple, cst.List) else [node.value]
            self.returned.update(self.ctx.module.code_for_node(v) for v in values if type(v) in (cst.Name, cst.Attribute))
        if node.value is not None and self.pending:
            names = self.outputs.setdefault(self.ctx.function_key, set())
            for sub in subtree(node.value, into_functions=False):
                if type(sub) is cst.Name:
                    names.add(sub.value)

    def visit_Arg(self, node: cst.Arg) -> None:
        if self.pending and type(node.value) is cst.Name:
            self.outputs.setdefault(self.ctx.function_key, set()).add(node.value.value)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if type(func) is cst.Attribute:
            last = func.attr.value
        elif type(func) is cst.Name:
            last = func.value
        else:
            return
        if last in METHOD_ALLOC:
            if type(func) is not cst.Attribute:
                return
        elif last not in TORCH_ALLOC or self.ctx.qualname(func) != f"torch.{last}":
            return
        values = allocation_shape(self.ctx, node, last)
        if not values:
            return
        literals = [v for v in values if v is not None and v > 1]
        if not literals or (len(values) == 1 and _is_tile_like(values[0] or 0)):
            return
        problem = self.ctx.problem
        if problem is not None:
            matched = significant_match(literals, sizes_for(problem))
            if not matched:
                return
        elif len(values) < 2 or len(literals) != len(values):
            return
        else:
            matched = []
        self.pending.append(_Pending(node, self.ctx.function_key, values, matched, self._target(node),
                                     self._holder(node)))

    def finish(self) -> None:
        for p in self.pending:
            if in_main_guard(self.ctx, p.node):
                continue  # a self-test under __main__ never runs in the benchmark
            where = reach(self.ctx, p.key)
            if where == "harness" or (p.holder is not None and p.holder in self.capacities
                                      and p.holder not in self.returned):
                continue  # a pool whose size is checked against the need is a capacity
            call = self.ctx.module.code_for_node(p.node)
            call = call if len(call) <= 80 else call[:77] + "..."
            evidence = {"shape": shape_text(p.values), "function": p.key}
            if self.ctx.problem is not None:
                why = ", ".join(w.replace("the problem dimension ", "") for _, w in p.matched)
                evidence["meaning"] = why
                severity = None if where == "forward" else Severity.WARNING
                self.report(p.node, self.message.format(call=call, shape=shape_text(p.values), why=why),
                            evidence=evidence, severity=severity, confidence=self._confidence(p, where))
            elif where == "forward" and self._is_output(p):
                self.report(p.node, self.message_no_problem.format(call=call, shape=shape_text(p.values)),
                            evidence=evidence, severity=Severity.WARNING)

    # helpers ---------------------------------------------------------------------------
    def _target(self, node: cst.Call) -> Optional[str]:
        parent = self.ctx.parent(node)
        if type(parent) in (cst.Return, cst.Arg):
            return ""  # used directly as an output
        if type(parent) is cst.Assign and len(parent.targets) == 1:
            target = parent.targets[0].target
            if type(target) is cst.Name:
                return target.value
            if type(target) is cst.Attribute:
                return "self"  # stored on the module: outlives the call
        return None

    def _holder(self, node: cst.Call) -> Optional[str]:
        parent = self.ctx.parent(node)
        if type(parent) is cst.Assign and len(parent.targets) == 1 and type(parent.targets[0].target) in (
                cst.Name, cst.Attribute):
            return self.ctx.module.code_for_node(parent.targets[0].target)
        return None

    def _confidence(self, p: _Pending, where: str) -> Confidence:
        """Certain: an output of forward spelled entirely in the problem's sizes. Likely: an
        output with some of its sizes literal. Suspect: a scratch buffer or init-time tensor."""
        if where != "forward" or not self._is_output(p):
            return Confidence.SUSPECT
        literal = [v for v in p.values if v is not None]
        if len(literal) == len(p.values) and all(v in {m for m, _ in p.matched} or v <= 1 for v in literal) \
                and not under_size_test(self.ctx, p.node):
            return Confidence.CERTAIN
        return Confidence.LIKELY

    def _is_output(self, p: _Pending) -> bool:
        if p.target in ("", "self"):
            return True
        return p.target is not None and p.target in self.outputs.get(p.key, set())

