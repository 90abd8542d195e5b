from __future__ import annotations

from typing import Optional, Union

import libcst as cst

from gatekeeper.report import Category, Confidence, Severity
from gatekeeper.analyses.cpp_shape_tests import shape_tests
from gatekeeper.analyses.dispatch_literals import all_fixed, dispatch_literal, dispatch_members, nominal_meaning
from gatekeeper.analyses.shape_helpers import (
    Literal, in_main_guard, is_setting, module_constant, pattern_literals, shape_text, size_read_kind,
)
from gatekeeper.static.cpp_sources import CppSource
from gatekeeper.static.rule import Rule
from gatekeeper.static.walk import subtree
from gatekeeper.static.examples import Invalid, Valid, snippet

_P = "R = 4\nB = 16\nD = 48\ndef get_inputs():\n    return [torch.randn(R, B, D)]\n"
_HEADER = "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n"
_EQUALITY = (cst.Equal, cst.NotEqual)
_MEMBERSHIP = (cst.In, cst.NotIn)


class ShapeDispatch(Rule):
    """The code compares an input's shape with literal sizes and acts on it:
    `if x.shape == (16, 48)`, `x.size(0) == 16`, `x.shape[1] == 4096`,
    `tuple(x.shape) in {...}`, `B, D = x.shape; if D == 48`, `match x.shape: case (16, 48)`,
    a literal dict looked up by shape (`KERNELS[tuple(x.shape)]`), or in C++
    `if (x.size(1) == 4096)`, `TORCH_CHECK(x.size(0) == 16)` and
    `switch (x.size(1)) { case 4096: ... }`.

    Why it games the benchmark: a path specialised for the nominal shape (or a kernel that
    only exists for it) passes the benchmark and is wrong or missing for any other input.

    Asserts and checks that raise on any other shape are findings too: `assert x.shape ==
    (16, 48)` honestly declares that the kernel only supports the nominal shape, which the
    jittered benchmark rejects anyway; the finding says so before anything runs.

    Not flagged: `x.dim() == 3`, `x.ndim`, `len(x.shape)`, alignment tests such as
    `x.shape[-1] % 4 == 0`, comparisons with 0 or 1, ordering limits (`x.size(-1) <= 1024`),
    and comparisons between two sizes (`x.size(1) == w.size(0)`). With the problem file, a
    literal equal to the problem's sizes is an error and any other literal a warning;
    without it every match is a warning.

    Known false-positive patterns, and why it does not fire on them:
    - rank and alignment tests (`x.dim() == 3`, `x.shape[-1] % 4 == 0`), comparisons with 0
      or 1 and ordering limits (`x.size(-1) <= 1024`): not a shape literal;
    - consistency checks between inputs (`x.size(1) == w.size(0)`): two sizes, no literal;
    - a cache keyed by `tuple(x.shape)` filled at run time: not a literal table;
    - self-referential bindings (`k = (k, k, k)`) are resolved once and answer "unknown";
    - a table of launch settings (numbers, strings, `triton.Config` of literals) looked up
      with a generic default (`TUNED.get(tuple(x.shape), 4)`): every shape runs the same
      kernel; without a default (`TUNED[key]`), or a table of kernels, it is a finding;
    - a literal equal to a dimension that every declared shape fixes (`if d == 128:` for a
      head width of 128 in every shape of `shapes.py`): part of the problem, not a free size;
      so is a set of supported widths that holds it (`D in (64, 128)`, a `switch` whose cases
      are 64 and 128, an `if (d == 128) ... else if (d == 64)` chain over the same size).

    Confidence: likely; the jittered-shape trials (GK602) confirm it (wrong or raising at
    another size) or clear it (a fast path with a correct general path).
    """

    code = "GK205"
    name = "ShapeDispatch"
    category = Category.HARDCODED_SHAPE
    severity = Severity.ERROR
    confidence = Confidence.LIKELY
    confirmed_by = "GK602"
    summary = "branches on (or asserts) the input shape being the problem's nominal shape"
    message = (
        "`{test}` compares the input's shape with {literal}, which {why}: the submission takes a path "
        "made for (or only works at) the benchmark's nominal shape, and any other input gets another path "
        "or none."
    )
    message_assert = (
        "`{test}` asserts that the input has the shape {literal}, which {why}: the kernel only supports the "
        "benchmark's nominal shape and fails on every other input size."
    )
    message_weak = (
        "`{test}` compares the input's shape with the literal {literal}: a path specialised for one input "
        "shape. {context}"
    )
    hint = (
        "Write one shape-generic path: read the sizes from the inputs (`x.size(0)`, `x.shape[-1]`), pass "
        "them to the kernel, and compute the grid from them. Checks that are legitimate compare sizes with "
        "each other (`x.size(1) == w.size(0)`) or test alignment (`x.shape[-1] % 4 == 0`)."
    )
    EXAMPLE_PROBLEM = _P
    VALID = [
        Valid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    assert x.dim() == 3 and x.shape[-1] % 4 == 0
                    if x.size(0) == 1:
                        x = x.squeeze(0)
                    return k(x)
        """)),
        Valid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    if x.size(-1) > 1024:
                        raise ValueError('row too long for one block')
                    return k(x, x.size(0), x.size(1))
        """)),
        Valid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x, w):
                    if x.size(1) != w.size(0):
                        raise ValueError('shape mismatch')
                    return k(x, w)
        """)),
        # a kernel cache keyed by shape, filled at run time, is not a literal table
        Valid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    key = tuple(x.shape)
                    if key not in self._compiled:
                        self._compiled[key] = build(key)
                    return self._compiled[key](x)
        """)),
        Valid(snippet("""
            src = '''
            torch::Tensor f(torch::Tensor x) { TORCH_CHECK(x.dim() == 3); TORCH_CHECK(x.size(2) % 4 == 0); return x; }
            '''
        """)),
        # tuned launch settings per shape with a generic default: every shape runs the same kernel
        Valid(snippet("""
            import torch
            TUNED = {(4, 16, 48): 8, (8, 32, 64): 2}
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    warps = TUNED.get(tuple(x.shape), 4)
                    return k(x, x.size(0), x.size(1), num_warps=warps)
        """)),
    ]
    INVALID = [
        # the same table without a default: any other shape raises
        Invalid(snippet("""
            import torch
            TUNED = {(4, 16, 48): 8}
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    warps = TUNED[tuple(x.shape)]
                    return k(x, x.size(0), x.size(1), num_warps=warps)
        """), line=5, message="compares the input's shape with (4, 16, 48)"),
        Invalid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    if x.shape == (4, 16, 48):
                        return fast(x)
                    return slow(x)
        """), line=4, message="`x.shape == (4, 16, 48)` compares the input's shape with (4, 16, 48)"),
        Invalid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    if x.size(2) == 48:
                        return fast(x)
                    return slow(x)
        """), line=4, message="`x.size(2) == 48` compares the input's shape with 48"),
        Invalid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    R, B, D = x.shape
                    return fast(x) if D == 48 else slow(x)
        """), line=5, message="`D == 48` compares the input's shape with 48"),
        Invalid(snippet("""
            import torch as T
            FAST = {(4, 16, 48): 'k48'}
            class ModelNew(T.nn.Module):
                def forward(self, x):
                    name = FAST.get(tuple(x.shape))
                    return run(name, x)
        """), line=5, message="`FAST.get(tuple(x.shape))` compares the input's shape with (4, 16, 48)"),
        Invalid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    assert tuple(x.shape) in {(4, 16, 48)}
                    return k(x)
        """), line=4, message="`tuple(x.shape) in {(4, 16, 48)}` asserts that the input has the shape (4, 16, 48)"),
        Invalid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    match tuple(x.shape):
                        case (4, 16, 48):
                            return fast(x)
                        case _:
                            return slow(x)
        """), line=5, message="`match tuple(x.shape): case (4, 16, 48)` compares the input's shape with (4, 16, 48)"),
        Invalid(snippet("""
            src = '''
            torch::Tensor f(torch::Tensor x) { TORCH_CHECK(x.size(2) == 48, "only D=48"); return x; }
            '''
        """), line=2, message="`x.size(2) == 48` compares the input's shape with 48"),
        Invalid(snippet("""
            src = '''
            torch::Tensor f(torch::Tensor x) {
              switch (x.size(2)) {
                case 48: return k48(x);
                default: return generic(x);
              }
            }
            '''
        """), line=4, message="`switch (x.size(2))` compares the input's shape with 48"),
    ]

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.unpacked: dict[str, set[str]] = {}
        self.asserts = 0
        self.self_dicts: dict[str, cst.Dict] = {}
        self.self_lookups: list[tuple[cst.CSTNode, str]] = []

    # bookkeeping ----------------------------------------------------------------------
    def visit_Assert(self, node: cst.Assert) -> None:
        self.asserts += 1

    def leave_Assert(self, node: cst.Assert) -> None:
        self.asserts -= 1

    def visit_Assign(self, node: cst.Assign) -> None:
        target = node.targets[0].target if len(node.targets) == 1 else None
        if type(target) in (cst.Tuple, cst.List):
            self._unpack(target, node.value)
        elif (type(target) is cst.Attribute and type(target.value) is cst.Name
              and target.value.value == "self" and type(node.value) is cst.Dict):
            self.self_dicts[target.attr.value] = node.value

    def _unpack(self, target: Union[cst.Tuple, cst.List], value: cst.BaseExpression) -> None:
        names = self.unpacked.setdefault(self.ctx.function_key, set())
        elements = [e.value for e in target.elements]
        if self._kind(value) == "shape":
            names.update(e.value for e in elements if type(e) is cst.Name)
        elif type(value) in (cst.Tuple, cst.List) and len(value.elements) == len(elements):
            for e, v in zip(elements, value.elements):
                if type(e) is cst.Name and self._kind(v.value) == "size":
                    names.add(e.value)

    def _kind(self, expr: cst.BaseExpression) -> Optional[str]:
        return size_read_kind(self.ctx, expr, frozenset(self.unpacked.get(self.ctx.function_key, ())))

    # comparisons ----------------------------------------------------------------------
    def visit_Comparison(self, node: cst.Comparison) -> None:
        left = node.left
        for target in node.comparisons:
            right = target.comparator
            op = target.operator
            if isinstance(op, _EQUALITY):
                for a, b in ((left, right), (right, left)):
                    kind = self._kind(a)
                    if kind is not None:
                        literal = dispatch_literal(self.ctx, b, kind)
                        if literal is not None:
                            self._judge(node, [literal])
                        break
            elif isinstance(op, _MEMBERSHIP):
                kind = self._kind(left)
                if kind is not None:
                    literals = dispatch_members(self.ctx, right, kind)
                    if literals:
                        self._judge(node, literals)
            left = right

    def visit_Subscript(self, node: cst.Subscript) -> None:
        if len(node.slice) != 1 or type(node.slice[0].slice) is not cst.Index:
            return
        key = node.slice[0].slice.value
        if type(key) in (cst.Integer, cst.SimpleString) or self._kind(key) is None:
            return
        self._lookup(node, node.value, self._kind(key) or "shape")

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if type(func) is cst.Attribute and func.attr.value == "get" and node.args:
            kind = self._kind(node.args[0].value)
            if kind is not None:
                if len(node.args) > 1 and self._settings_table(func.value) and not (
                        type(node.args[1].value) is cst.Name and node.args[1].value.value == "None"):
                    return  # tuned launch settings with a generic default: every shape runs
                self._lookup(node, func.value, kind)

    def _settings_table(self, container: cst.BaseExpression) -> bool:
        """A literal dict whose values are launch settings (numbers, strings, tuples or dicts
        of them, `triton.Config(...)` of literals), not kernels or functions to dispatch to."""
        table = module_constant(self.ctx, container.value) if type(container) is cst.Name else (
            self.self_dicts.get(container.attr.value) if type(container) is cst.Attribute else None)
        if type(table) is not cst.Dict or not table.elements:
            return False
        return all(type(e) is cst.DictElement and is_setting(e.value) for e in table.elements)

    def visit_Match(self, node: cst.Match) -> None:
        kind = self._kind(node.subject)
        if kind is None:
            return
        for case in node.cases:
            literals = pattern_literals(self.ctx, case.pattern, kind)
            if literals:
                self._judge(case, literals, test=f"match {self.ctx.module.code_for_node(node.subject)}: case "
                            f"{self.ctx.module.code_for_node(case.pattern)}")

    def _lookup(self, node: cst.CSTNode, container: cst.BaseExpression, kind: str) -> None:
        if type(container) is cst.Name:
            value = module_constant(self.ctx, container.value)
            if type(value) is cst.Dict:
                literals = dispatch_members(self.ctx, value, kind)
                if literals:
                    self._judge(node, literals)
        elif type(container) is cst.Attribute and type(container.value) is cst.Name and container.value.value == "self":
            self.self_lookups.append((node, container.attr.value))

    def finish(self) -> None:
        for node, attr in self.self_lookups:
            table = self.self_dicts.get(attr)
            if table is not None:
                literals = dispatch_members(self.ctx, table, "shape") + dispatch_members(self.ctx, table, "size")
                if literals:
                    self._judge(node, literals)

    def _judge(self, node: cst.CSTNode, literals: list[Literal], test: Optional[str] = None) -> None:
        if in_main_guard(self.ctx, node):
            return  # a self-test under __main__ never runs in the benchmark
        if self.ctx.problem is not None and (all_fixed(self.ctx.problem, literals) or
                                             _supported_widths(self.ctx.problem, literals)):
            return  # `d == 128` for a head width every declared shape fixes: part of the problem
        if test is None:
            test = self.ctx.module.code_for_node(node)
        test = test if len(test) <= 80 else test[:77] + "..."
        problem = self.ctx.problem
        shown = ", ".join(shape_text(list(v)) if isinstance(v, tuple) else str(v) for v in literals[:4])
        evidence = {"literals": [list(v) if isinstance(v, tuple) else v for v in literals]}
        why = nominal_meaning(self.ctx.problem, literals) if problem is not None else None
        if why is None:
            context = ("It is not one of the problem's sizes, but the sizes should still come from the inputs."
                       if problem is not None else
                       "Without the problem file the gatekeeper cannot tell whether it is the nominal shape "
                       "(pass --problem to make this certain).")
            self.report(node, _owned(self.message_weak.format(test=test, literal=shown, context=context), node),
                        evidence=evidence, severity=Severity.WARNING)
            return
        evidence["meaning"] = why
        template = self.message_assert if self.asserts else self.message
        self.report(node, _owned(template.format(test=test, literal=shown, why=why), node), evidence=evidence)

    # C++: x.size(1) == 4096, TORCH_CHECK(x.sizes()[0] == 16), switch (x.size(1)) ------------
    def check_cpp(self, source: CppSource) -> None:
        found = list(shape_tests(source))
        cases: dict[str, list[int]] = {}
        for _, value, test in found:
            cases.setdefault(_tested(test, value), []).append(value)
        widths = {test for test, values in cases.items()
                  if self.ctx.problem is not None and _supported_widths(self.ctx.problem, values)}
        for offset, value, test in found:
            if _tested(test, value) not in widths:
                self._report_cpp_literal(source, offset, value, test)

    def _report_cpp_literal(self, source: CppSource, offset: int, value: int, test: str) -> None:
        if self.ctx.problem is not None and all_fixed(self.ctx.problem, [value]):
            return
        why = nominal_meaning(self.ctx.problem, [value]) if self.ctx.problem is not None else None
        test = test if len(test) <= 80 else test[:77] + "..."
        if why is None:
            context = ("Without the problem file the gatekeeper cannot tell whether it is the nominal "
                       "shape (pass --problem to make this certain)." if self.ctx.problem is None else
                       "It is not one of the problem's sizes, but the sizes should still come from the inputs.")
            self.report_cpp(source, offset, self.message_weak.format(test=test, literal=value, context=context),
                            evidence={"literals": [value]}, severity=Severity.WARNING)
        else:
            self.report_cpp(source, offset, self.message.format(test=test, literal=value, why=why),
                            evidence={"literals": [value], "meaning": why})


def _owned(message: str, node: cst.CSTNode) -> str:
    """Name whose shape is tested when it is a parameter or buffer (`self.weight.shape[2:]`):
    "the input's shape" would say something false about it."""
    for sub in subtree(node, into_functions=False):
        if type(sub) is cst.Attribute and sub.attr.value in ("shape", "size") and type(sub.value) is cst.Attribute \
                and type(sub.value.value) is cst.Name and sub.value.value.value == "self":
            owner = f"`self.{sub.value.attr.value}`"
            return message.replace("the input's shape", f"the shape of {owner}").replace(
                "the input has the shape", f"{owner} has the shape").replace("one input shape", f"one shape of {owner}")
    return message


def _tested(test: str, value: int) -> str:
    """What a C++ size test compares: the switch itself, or the side of `==` that is not the
    literal, so an `if (d == 128) ... else if (d == 64)` chain groups as a switch's cases do."""
    if test.startswith("switch"):
        return test
    left, sep, right = test.partition("==")
    if not sep or "==" in right:
        return test
    left, right = left.strip(), right.strip()
    return f"{right} ==" if left == str(value) else (f"{left} ==" if right == str(value) else test)


def _supported_widths(problem: object, literals: list[Literal]) -> bool:
    """Several single sizes, one of them a dimension every declared shape fixes (`D in (64, 128)`,
    `switch (d) { case 64: ... case 128: ... }` with HEAD_DIM = 128): the widths a kernel supports,
    the problem's among them, on the dimension the problem never varies."""
    values = [v for v in literals if isinstance(v, int)]
    return len(values) >= 2 and len(values) == len(literals) and any(all_fixed(problem, [v]) for v in values)
