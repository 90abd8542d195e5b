from __future__ import annotations

from typing import Optional

import libcst as cst

from gatekeeper.report import Category, Severity
from gatekeeper.static.rule import Rule
from gatekeeper.static.walk import subtree


def _counter_name(target: cst.BaseExpression) -> Optional[str]:
    if isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) and target.value.value == "self":
        return f"self.{target.attr.value}"
    if isinstance(target, cst.Name):
        return target.value
    return None


def _names_in(expr: cst.CSTNode) -> set[str]:
    found: set[str] = set()
    for current in subtree(expr):
        name = _counter_name(current) if isinstance(current, (cst.Attribute, cst.Name)) else None
        if name:
            found.add(name)
    return found


def _contains_return(block: cst.CSTNode) -> bool:
    return any(isinstance(n, cst.Return) for n in subtree(block, into_functions=False))


class SwitchesOnCallCount(Rule):
    """A counter incremented on every call (`self.calls += 1`, a global, `next(counter)`)
    decides which path returns: after N calls the code returns something else (a stored
    result, a cheaper path).

    Why it games the benchmark: harnesses check correctness on the first calls and time the
    later ones; a submission that counts calls can be right while checked and fast (and
    wrong) while timed. A counter used only for logging, or that never decides a `return`,
    is not flagged.
    """

    code = "GK104"
    name = "SwitchesOnCallCount"
    category = Category.CACHED_OUTPUT
    severity = Severity.ERROR
    summary = "a call counter picks a different return path after some calls"
    message = "The branch at this line tests `{counter}`, which counts calls, and returns from it: the result depends on how many times forward ran."
    hint = "Make every call do the same work on its inputs; remove the call counter from the return path."

    VALID = [
        "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        self.calls = getattr(self, 'calls', 0) + 1\n"
        "        if self.calls % 100 == 0:\n            log(self.calls)\n        return run(x)\n",
    ]
    INVALID = [
        "import torch\nclass ModelNew(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.n = 0\n"
        "    def forward(self, x):\n        self.n += 1\n        if self.n > 3:\n            return self.fast(x)\n        return self.exact(x)\n",
        "import torch\n_calls = 0\ndef forward(x):\n    global _calls\n    _calls = _calls + 1\n    if _calls <= 5:\n        return exact(x)\n    return cheap(x)\n",
        "import itertools\n_tick = itertools.count()\ndef forward(x):\n    return exact(x) if next(_tick) < 3 else cheap(x)\n",
    ]

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.counters: set[str] = set()
        self.tests: list[tuple[cst.CSTNode, cst.CSTNode]] = []

    def _in_call_path(self) -> bool:
        return bool(self.ctx.functions) and self.ctx.functions[-1].name.value != "__init__"

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        if self._in_call_path() and isinstance(node.operator, (cst.AddAssign, cst.SubtractAssign)):
            name = _counter_name(node.target)
            if name:
                self.counters.add(name)

    def visit_Assign(self, node: cst.Assign) -> None:
        if not self._in_call_path() or not isinstance(node.value, cst.BinaryOperation):
            return
        for target in node.targets:
            name = _counter_name(target.target)
            if name and name in _names_in(node.value):
                self.counters.add(name)

    def visit_Call(self, node: cst.Call) -> None:
        if self.ctx.qualname(node.func) == "builtins.next" and node.args:
            name = _counter_name(node.args[0].value)
            if name:
                self.counters.add(f"next({name})")

    def visit_If(self, node: cst.If) -> None:
        if self._in_call_path() and (_contains_return(node.body) or (node.orelse is not None and _contains_return(node.orelse))):
            self.tests.append((node, node.test))

    def visit_IfExp(self, node: cst.IfExp) -> None:
        if self._in_call_path() and isinstance(self.ctx.parent(node), cst.Return):
            self.tests.append((node, node.test))

    def finish(self) -> None:
        for node, test in self.tests:
            names = _names_in(test)
            if any(isinstance(c, cst.Call) and self.ctx.qualname(c.func) == "builtins.next" for c in subtree(test)):
                names |= {c for c in self.counters if c.startswith("next(")}
            hit = sorted(n for n in names if n in self.counters)
            if hit:
                self.report(node, self.message.format(counter=hit[0]), evidence={"counter": hit[0]})

