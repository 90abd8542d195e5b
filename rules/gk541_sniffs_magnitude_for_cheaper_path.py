from __future__ import annotations

from typing import Optional

import libcst as cst

from gatekeeper.static.walk import children as node_children

from gatekeeper.report import Category, Severity
from gatekeeper.analyses.value_sniffing import Scope, arms, cheaper, cpp_sniffs, magnitude_tests, root, value_read
from gatekeeper.static.cpp_sources import CppSource
from gatekeeper.static.examples import Invalid, Valid, snippet
from gatekeeper.static.rule import Rule


class SniffsMagnitudeForCheaperPath(Rule):
    """A branch on the forward path reads the magnitude of an input's values, or any value
    of a constant sample of it, and picks a cheaper path: `if x.abs().amax() < 0.5:
    return _ext.taylor(x)`, `y = x.half() if x.max().item() < 100 else x`,
    `if x[0, 0].item() == 0: return torch.zeros_like(x)`. The read may go through a local
    (`s = x.flatten()[:4096].std()`), the submission's own reduction (`_ext.absmax(x).item()`),
    or a predicate helper (`def _small(t): return
    t.abs().max() < 1e-2`); the cheaper path returns without computing (zeros, the input, a
    constant), computes in fp16 / bf16 / fp8 while the other path does not, or calls a
    function named as an approximation (`taylor`, `approx`, `low_order`...). The same in
    C++: `if (x.abs().max().item<float>() < 0.25f) { ... }` with such a body.

    Why it games the benchmark: benchmark inputs come from one distribution. A threshold on
    their magnitude, or a look at a few of their elements, cannot make a shortcut correct
    for every input the problem accepts; it only predicts that the benchmark's inputs will
    pass the tolerance. Certain: a sound special case tests the whole input exactly, never
    a magnitude or a sample.

    Not flagged: branches on integer metadata (`x.shape[0] > 4096`, `max(lengths)` choosing
    a split count: both paths compute the result); exact whole-input tests
    (`torch.all(x == 0)`) and magnitude branches whose paths are equally precise (GK540
    reports those as suspect, and the run-time value trials GK673 decide); NaN / inf guards
    that raise; reads of the module's own weights (`self.weight.abs().max()`); code that
    runs only in `__init__` or at import.
    """

    code = "GK541"
    name = "SniffsMagnitudeForCheaperPath"
    category = Category.INCORRECT
    severity = Severity.ERROR
    summary = "a branch on sampled input magnitudes picks a path with less work or lower precision"
    message = ("This branch reads the input `{name}` ({how}) and its {which} path {cheaper}: a magnitude or a sample "
               "of benchmark inputs cannot make that path right for every input the problem accepts.")
    hint = (
        "Compute every input the same way, at the problem's precision. A real special case (exact zeros) "
        "must test the whole input exactly and give the exact result on both paths."
    )
    VALID = [
        Valid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x, lengths):
                    longest = int(lengths.max().item())
                    splits = max(1, longest // 2048)
                    if splits == 1:
                        return _ext.one_pass(x, lengths)
                    return _ext.split(x, lengths, splits)
        """)),
        Valid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    if not torch.isfinite(x).all():
                        raise ValueError('non-finite input')
                    if self.weight.abs().max() < 1e-3:
                        return torch.zeros_like(x)
                    return _ext.run(x, self.weight)
        """)),
        Valid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    if x.abs().amax() > 80.0:
                        return _ext.safe_exp(x)
                    return _ext.exp(x)
        """)),
        Valid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x, mask):
                    rows = int(_ext.count_rows(mask).item())
                    if rows > 4096:
                        return _ext.split_pass(x, mask)
                    return _ext.one_pass(x, mask)
        """)),
    ]
    INVALID = [
        Invalid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    if float(_ext.absmax(x)) < 4.0:
                        return _ext.gelu(x.half()).float()
                    return _ext.gelu(x)
        """), line=4, message="computes in lower precision (`.half()`)"),
        Invalid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    if x.abs().amax() < 0.5:
                        return _ext.taylor3(x)
                    return _ext.exact(x)
        """), line=4, message="reads the input `x` (its magnitude compared with the threshold 0.5)"),
        Invalid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, a, b):
                    s = a.flatten()[:4096].std()
                    if s < 2.0:
                        return _ext.mm(a.half(), b.half()).float()
                    return _ext.mm(a, b)
        """), line=5, message="computes in lower precision (`.half()`)"),
        Invalid(snippet("""
            import torch
            def _tiny(t):
                return t.abs().max().item() < 1e-3
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    if _tiny(x):
                        return torch.zeros_like(x)
                    return _ext.run(x)
        """), line=6, message="returns `torch.zeros_like(...)` without computing the result"),
        Invalid(snippet("""
            src = r'''
            torch::Tensor f(torch::Tensor x) {
              if (x.abs().max().item<float>() < 0.25f) {
                return gelu_half(x.to(at::kHalf)).to(at::kFloat);
              }
              return gelu_exact(x);
            }
            '''
        """), line=3, message="computes in lower precision (`kHalf`)"),
    ]

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # per open function: its parameters, its key, and its assignments and branches in source
        # order; replayed in finish only for functions with a branch that run per call
        self.open: list[tuple[set[str], list[cst.CSTNode], list[str]]] = []
        self.functions: list[tuple[str, set[str], list[cst.CSTNode]]] = []
        self.predicates: dict[str, tuple[list[str], cst.BaseExpression]] = {}  # one-return helpers

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        params = [p.name.value for p in (*node.params.posonly_params, *node.params.params, *node.params.kwonly_params)]
        self.open.append(({p for p in params if p not in ("self", "cls")}, [], []))
        body = node.body.body if type(node.body) is cst.IndentedBlock else ()
        if len(body) == 1 and type(body[0]) is cst.SimpleStatementLine and type(body[0].body[0]) is cst.Return \
                and body[0].body[0].value is not None:
            self.predicates[node.name.value] = ([p for p in params if p not in ("self", "cls")], body[0].body[0].value)

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        params, events, key = self.open.pop()
        if key:  # it has a branch
            self.functions.append((key[0], params, events))

    def visit_Assign(self, node: cst.Assign) -> None:
        if self.open and len(node.targets) == 1 and type(node.targets[0].target) is cst.Name:
            self.open[-1][1].append(node)

    def visit_If(self, node: cst.If) -> None:
        self._branch(node)

    def visit_IfExp(self, node: cst.IfExp) -> None:
        self._branch(node)

    def _branch(self, node: cst.CSTNode) -> None:
        if self.open:
            _, events, key = self.open[-1]
            events.append(node)
            if not key:
                key.append(self.ctx.function_key)

    def _assign(self, scope: Scope, node: cst.Assign) -> None:
        name = node.targets[0].target.value  # type: ignore[attr-defined]
        if type(node.value) in (cst.Comparison, cst.BooleanOperation, cst.UnaryOperation):
            test = next(magnitude_tests(scope, node.value, self.ctx), None)
            if test is not None:
                scope.tests[name] = test
                return
        read = value_read(scope, node.value, self.ctx)
        if read is not None:
            scope.reads[name] = read[0]
            if read[1]:
                scope.sampled.add(name)
            return
        origin, sampled = root(scope, node.value, self.ctx)
        if origin is not None:
            scope.derived.add(name)
            if sampled:
                scope.sampled.add(name)

    def finish(self) -> None:
        for key, params, events in self.functions:
            if self.ctx.is_init_only(key):
                continue
            scope = Scope(params)
            for event in events:
                if type(event) is cst.Assign:
                    self._assign(scope, event)
                else:
                    self._judge(event, scope)

    def _judge(self, node: cst.CSTNode, scope: Scope) -> None:
        found = self._sniff(node.test, scope)  # type: ignore[attr-defined]
        if found is None:
            return
        name, how = found
        body, other = arms(node)
        if type(node) is cst.If and not other:
            other = self._after(node)
        for which, arm, rest in (("first", body, other), ("other", other, body)):
            what = cheaper(self.ctx, scope, arm, rest) if arm else None
            if what:
                self.report(node.test, self.message.format(name=name, how=how, which=which, cheaper=what),  # type: ignore[attr-defined]
                            evidence={"input": name, "read": how, "path": what})
                break

    def _sniff(self, test: cst.BaseExpression, scope: Scope) -> Optional[tuple[str, str]]:
        for found in magnitude_tests(scope, test, self.ctx):
            return found
        # a predicate helper: `if _tiny(x):` where `_tiny` returns a magnitude test of its parameter
        stack: list[cst.CSTNode] = [test]
        while stack:
            node = stack.pop()
            if type(node) is cst.Call:
                func = node.func
                callee = func.value if type(func) is cst.Name else func.attr.value if (
                    type(func) is cst.Attribute and type(func.value) is cst.Name and func.value.value == "self") else None
                if callee in self.predicates:
                    params, returned = self.predicates[callee]
                    for index, arg in enumerate(node.args[:len(params)]):
                        origin, sampled = root(scope, arg.value, self.ctx)
                        if origin is None:
                            continue
                        inner = Scope({params[index]})
                        if sampled:
                            inner.sampled.add(params[index])
                        for _, how in magnitude_tests(inner, returned, self.ctx):
                            return origin, f"`{callee}()` tests {how}"
            stack.extend(node_children(node))
        return None

    def check_cpp(self, source: CppSource) -> None:
        if "item" not in source.by_text["ident"]:
            return
        for offset, name, what in cpp_sniffs(source):
            how = "a reduction read back with `.item()` and compared with a threshold"
            self.report_cpp(source, offset, self.message.format(name=name, how=how, which="first", cheaper=what),
                            evidence={"input": name, "read": how, "path": what})

    def _after(self, node: cst.If) -> list[cst.CSTNode]:
        block = self.ctx.parent(node)
        if type(block) is not cst.IndentedBlock:
            return []
        stmts = list(block.body)
        return stmts[stmts.index(node) + 1:] if node in stmts else []


