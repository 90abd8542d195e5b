from __future__ import annotations

from typing import Optional

import libcst as cst

from gatekeeper.report import Category, Confidence, Severity
from gatekeeper.analyses.returned_values_rule import FlowRule
from gatekeeper.static.syntax import is_self_attr, self_attr
from gatekeeper.static.walk import subtree
from gatekeeper.static.examples import Invalid, Valid, snippet


class SwitchesOnCallCount(FlowRule):
    """A call counter decides which path returns: state that outlives the call (an
    attribute of `self`, or a module global / closure variable the function declares
    `global`/`nonlocal`, or an `itertools.count` held there) is advanced on every call on
    the forward path (`self.calls += 1`, `_n = _n + 1`, `next(_tick)`) and read in a branch
    that returns.

    Why it games the benchmark: harnesses check correctness on the first calls and time the
    later ones; a submission that counts calls can be right while checked and fast (and
    wrong) while timed. Certain when the counted branch returns a stored result without
    recomputing; otherwise suspect (warm-up counters that switch to a captured graph are
    common and honest), confirmed by the run-time checks on later calls (GK611).

    Known false-positive patterns it does not fire on, and why:
    - loop indices and other locals incremented inside the call (`i += 1`): a local starts
      afresh on every call, so it cannot count calls;
    - `if isinstance(x, Iterable)`, `if x.is_cuda`: only the counter itself is matched,
      never a name that happens to be incremented somewhere else in the file;
    - counters advanced only in `__init__` or set-up helpers, and counters used only for
      logging (no `return` depends on them).
    """

    code = "GK104"
    name = "SwitchesOnCallCount"
    category = Category.CACHED_OUTPUT
    severity = Severity.ERROR
    confidence = Confidence.SUSPECT
    confirmed_by = "GK611"
    summary = "a call counter picks a different return path after some calls"
    message = ("The branch at this line tests `{counter}`, which `{where}` advances on every call, and returns "
               "from it: the result depends on how many times forward ran{stored}.")
    hint = "Make every call do the same work on its inputs; remove the call counter from the return path."

    VALID = [
        Valid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    self.calls = getattr(self, 'calls', 0) + 1
                    if self.calls % 100 == 0:
                        log(self.calls)
                    return run(x)
        """)),
        # a local loop counter and type tests are not call counters
        Valid(snippet("""
            import collections.abc, torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    i = 0
                    while i < 4:
                        x = x + 1
                        i += 1
                    if isinstance(x, collections.abc.Iterable) and not isinstance(x, str):
                        return run(x)
                    if x.is_cuda:
                        return run(x)
                    return x
        """)),
        # counted only at construction
        Valid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.n = 0
                    self.n += 1
                def forward(self, x):
                    if self.n > 3:
                        return run(x)
                    return run2(x)
        """)),
    ]
    INVALID = [
        Invalid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.n = 0
                def forward(self, x):
                    self.n += 1
                    if self.n > 3:
                        return self.fast(x)
                    return self.exact(x)
        """), line=8, message="The branch at this line tests `self.n`"),
        Invalid(snippet("""
            import torch
            _calls = 0
            def forward(x):
                global _calls
                _calls = _calls + 1
                if _calls <= 5:
                    return exact(x)
                return cheap(x)
        """), line=6, message="The branch at this line tests `_calls`"),
        Invalid(snippet("""
            import itertools
            _tick = itertools.count()
            def forward(x):
                return exact(x) if next(_tick) < 3 else cheap(x)
        """), line=4, message="The branch at this line tests `next(_tick)`"),
        # a counter kept in a module-level dict
        Invalid(snippet("""
            import torch
            _STATE = {'n': 0}
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    _STATE['n'] += 1
                    if _STATE['n'] > 10:
                        return cheap(x)
                    return exact(x)
        """), line=6, message="The branch at this line tests `_STATE`"),
        # certain: after three calls the stored result is handed back
        Invalid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    self.seen = getattr(self, 'seen', 0) + 1
                    if self.seen > 3:
                        return self.last
                    self.last = run(x)
                    return self.last
        """), line=5, message="The branch at this line tests `self.seen`"),
    ]

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.counters: dict[str, str] = {}  # counter -> function key advancing it
        self.declared: list[set[str]] = []
        self.tests: list[tuple[str, cst.CSTNode, cst.BaseExpression]] = []

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        super().visit_FunctionDef(node)
        self.declared.append(set())

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        super().leave_FunctionDef(node)
        self.declared.pop()

    def visit_Global(self, node: cst.Global) -> None:
        super().visit_Global(node)
        if self.declared:
            self.declared[-1].update(n.name.value for n in node.names)

    def visit_Nonlocal(self, node: cst.Nonlocal) -> None:
        super().visit_Nonlocal(node)
        if self.declared:
            self.declared[-1].update(n.name.value for n in node.names)

    def _counter(self, target: cst.BaseExpression) -> Optional[str]:
        """The name of call-surviving state `target` denotes, or None for a local."""
        if is_self_attr(target):
            return self_attr(target)
        if type(target) is cst.Name and self.declared and target.value in self.declared[-1]:
            return target.value
        if type(target) is cst.Subscript:
            # `self.state['n'] += 1`, `_STATE['calls'] += 1`: a counter inside held state
            base = target.value
            if type(base) is cst.Name and self._module_level(base.value):
                return base.value
            return self._counter(base)
        return None

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        if self.ctx.functions and type(node.operator) in (cst.AddAssign, cst.SubtractAssign):
            name = self._counter(node.target)
            if name:
                self.counters.setdefault(name, self.ctx.function_key)

    def visit_Assign(self, node: cst.Assign) -> None:
        super().visit_Assign(node)
        if not self.ctx.functions or type(node.value) is not cst.BinaryOperation:
            return
        if type(node.value.operator) not in (cst.Add, cst.Subtract):
            return
        for target in node.targets:
            name = self._counter(target.target)
            if name and name in self._state_read(node.value):
                self.counters.setdefault(name, self.ctx.function_key)

    def visit_Call(self, node: cst.Call) -> None:
        super().visit_Call(node)
        if self.ctx.functions and self.ctx.qualname(node.func) == "builtins.next" and node.args:
            arg = node.args[0].value
            name = self._counter(arg) or (arg.value if type(arg) is cst.Name and self._module_level(arg.value) else None)
            if name:
                self.counters.setdefault(f"next({name})", self.ctx.function_key)

    def _module_level(self, name: str) -> bool:
        owner = next((s for s in reversed(self.ctx.resolver.stack) if name in s.names), None)
        return owner is self.ctx.resolver.stack[0]

    def _state_read(self, expr: cst.CSTNode) -> set[str]:
        """Call-surviving state read in expr: `self.n`, a declared global, `getattr(self, 'n', 0)`."""
        found: set[str] = set()
        for current in subtree(expr):
            if type(current) in (cst.Attribute, cst.Name):
                name = self._counter(current)
                if name:
                    found.add(name)
            if (type(current) is cst.Call and type(current.func) is cst.Name and current.func.value == "getattr"
                    and len(current.args) >= 2 and type(current.args[0].value) is cst.Name
                    and current.args[0].value.value == "self" and type(current.args[1].value) is cst.SimpleString):
                found.add("self." + current.args[1].value.evaluated_value)  # type: ignore[operator]
            if type(current) is cst.Call and self.ctx.qualname(current.func) == "builtins.next" and current.args:
                arg = current.args[0].value
                name = self._counter(arg) or (arg.value if type(arg) is cst.Name and self._module_level(arg.value) else None)
                if name:
                    found.add(f"next({name})")
        return found

    def visit_If(self, node: cst.If) -> None:
        if self.ctx.functions:  # whether the branch returns is checked at the end, if a counter is tested
            self.tests.append((self.ctx.function_key, node, node.test))

    def visit_IfExp(self, node: cst.IfExp) -> None:
        if self.ctx.functions and type(self.ctx.parent(node)) is cst.Return:
            self.tests.append((self.ctx.function_key, node, node.test))

    def finish(self) -> None:
        live = {c: k for c, k in self.counters.items() if not self.ctx.is_init_only(k)}
        if not live:
            return
        for key, node, test in self.tests:
            if self.ctx.is_init_only(key):
                continue
            hit = sorted(n for n in self._test_names(test) if n in live)
            if not hit or (type(node) is cst.If and not _contains_return(node.body)
                           and not (node.orelse is not None and _contains_return(node.orelse))):
                continue
            stored = self.flow.guarded_returns(key, test)
            self.report(
                node,
                self.message.format(counter=hit[0], where=live[hit[0]],
                                    stored=f", and the counted branch returns the stored {stored[0].stored}" if stored else ""),
                evidence={"counter": hit[0], "advanced_in": live[hit[0]]},
                confidence=Confidence.CERTAIN if stored else Confidence.SUSPECT,
            )

    def _test_names(self, test: cst.BaseExpression) -> set[str]:
        names: set[str] = set()
        for current in subtree(test):
            if type(current) is cst.Attribute and type(current.value) is cst.Name and current.value.value == "self":
                names.add(f"self.{current.attr.value}")
            elif type(current) is cst.Name:
                names.add(current.value)
            elif type(current) is cst.Call and self.ctx.qualname(current.func) == "builtins.next" and current.args:
                arg = current.args[0].value
                if type(arg) is cst.Name:
                    names.add(f"next({arg.value})")
                elif type(arg) is cst.Attribute and type(arg.value) is cst.Name and arg.value.value == "self":
                    names.add(f"next(self.{arg.attr.value})")
        return names


def _contains_return(block: cst.CSTNode) -> bool:
    return any(type(n) is cst.Return for n in subtree(block, into_functions=False))
