"""The base class of the GK3xx torch-fallback rules: feeding the shared `TorchUsage`, and
the severity policy. Not a rule file: it defines no rule with a `code`.

Severity of one torch use in the forward path (after the rule's `allow` option):

| situation                                                        | strict | default | lenient |
|------------------------------------------------------------------|--------|---------|---------|
| the forward launches no kernel of its own                        | error  | error   | error   |
| an op the reference computes (when --problem is given)           | error  | error   | error   |
| a reduction / contraction / conv / norm / softmax ("heavy") op   | error  | error   | warning |
| other torch glue around the submission's own kernel              | error  | warning | warning |

A severity set for the rule in the configuration (`[rules.GK301] severity = ...`) replaces
this table when it differs from the profile's default for the rule (the rule cannot tell an
explicit `error` from the default `error`). Module-level and `__init__`-only code is never flagged (weight set-up).
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Any, Optional

import libcst as cst

from gatekeeper.errors import UsageError
from gatekeeper.report import Category, Severity
from gatekeeper.rules.gk3xx_torch_ops import squashed
from gatekeeper.rules.gk3xx_torch_usage import TorchUsage, Use
from gatekeeper.static.cpp_sources import CppSource
from gatekeeper.static.problem_facts import ProblemFacts
from gatekeeper.static.rule import Rule
from gatekeeper.static.walk import walk

_OPERATOR_OPS = {cst.MatrixMultiply: "matmul", cst.Add: "add", cst.Subtract: "sub", cst.Multiply: "mul",
                 cst.Divide: "div", cst.Power: "pow"}
_REF_ATTR = "_gk3_reference_ops"


def reference_ops(problem: Optional[ProblemFacts]) -> frozenset[str]:
    """The ops the reference `Model` computes (squashed names: `layernorm`, `mean`,
    `matmul`, `add`), read from the problem's source once and kept on the facts object."""
    if problem is None:
        return frozenset()
    cached = problem.__dict__.get(_REF_ATTR)
    if cached is not None:
        return cached
    names: set[str] = set()
    for stmt in problem.module.body:
        if not (isinstance(stmt, cst.ClassDef) and stmt.name.value == "Model"):
            continue
        for entering, node in walk(stmt):
            if not entering:
                continue
            if isinstance(node, cst.Call):
                func = node.func
                if isinstance(func, cst.Attribute):
                    names.add(squashed(func.attr.value))
                elif isinstance(func, cst.Name):
                    names.add(squashed(func.value))
            elif isinstance(node, cst.BinaryOperation) and type(node.operator) in _OPERATOR_OPS:
                names.add(_OPERATOR_OPS[type(node.operator)])
    names -= {"super", "init", "forward", "module", "parameter", "randn", "rand", "zeros", "ones", "empty"}
    result = frozenset(names)
    problem.__dict__[_REF_ATTR] = result
    return result


class TorchFallbackRule(Rule):
    """Shared machinery; subclasses set `kinds` (which uses they report) and the texts."""

    category = Category.TORCH_FALLBACK
    severity = Severity.ERROR
    strict_severity = Severity.ERROR
    options: dict[str, Any] = {"allow": []}
    kinds: tuple[str, ...] = ()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.usage, self.feeds = TorchUsage.of(self.ctx)
        allow = self.settings.get("allow", [])
        if not isinstance(allow, list) or not all(isinstance(a, str) for a in allow):
            raise UsageError(f"the `allow` option of {self.code} (rules.{self.code}.options.allow) must be a list "
                             f"of op names or patterns, such as allow = [\"torch.relu\", \"mean\"]; got {allow!r}")
        self.allow: list[str] = allow

    # feeding the shared usage (only the first GK3xx rule does) ---------------------
    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        if self.feeds:
            self.usage.enter_function(node)

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        if self.feeds:
            self.usage.leave_function()

    def visit_Call(self, node: cst.Call) -> None:
        if self.feeds:
            self.usage.call(node)

    def visit_Assign(self, node: cst.Assign) -> None:
        if self.feeds:
            self.usage.assign([t.target for t in node.targets], node.value)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if self.feeds and node.value is not None:
            self.usage.assign([node.target], node.value)

    def visit_For(self, node: cst.For) -> None:
        if self.feeds:
            self.usage.loop(node)

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        if self.feeds:
            self.usage.operator(node)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        if self.feeds:
            self.usage.operator(node)

    def visit_UnaryOperation(self, node: cst.UnaryOperation) -> None:
        if self.feeds:
            self.usage.operator(node)

    def check_cpp(self, source: CppSource) -> None:
        if self.feeds:
            self.usage.cpp(source)

    # policy ----------------------------------------------------------------------------
    def allowed(self, use: Use) -> bool:
        names = (use.qual, use.op, use.qual.rsplit(".", 1)[-1], use.qual.rsplit("::", 1)[-1])
        return any(fnmatchcase(name, pattern) for pattern in self.allow for name in names)

    def decide(self, use: Use) -> Optional[tuple[Severity, str]]:
        """(severity, why) for a use, or None when the configuration allows it."""
        if self.allowed(use):
            return None
        profile = self.ctx.profile
        if self.active_severity != type(self).severity_for(profile):
            return self.active_severity, "its severity is set in the configuration"
        usage = self.usage
        kernel = usage.own_kernel
        has_kernel = kernel is not None or (use.cpp is not None and usage.has_cuda_kernel)
        if not has_kernel:
            return Severity.ERROR, "the forward path launches no kernel of its own, so torch does the work being timed"
        if profile == "strict":
            return Severity.ERROR, "the strict profile requires every compute op to be the submission's own"
        if squashed(use.op) in reference_ops(self.ctx.problem):
            return Severity.ERROR, f"`{use.op}` is part of what the reference computes, so torch does part of the timed work"
        if use.heavy and profile != "lenient":
            return Severity.ERROR, (f"`{use.op}` is a reduction, contraction or other heavy op: the kind of work "
                                    "the benchmark times, not glue")
        where = f" `{kernel.what}`" if kernel is not None else ""
        return Severity.WARNING, (f"it looks like glue around the submission's own kernel{where}, tolerated as a "
                                  "warning under the default and lenient profiles and rejected under strict")

    def my_uses(self) -> list[Use]:
        self.usage.resolve()
        return [u for u in self.usage.uses if u.kind in self.kinds and u.fallback is None]

    def finish(self) -> None:
        for use in self.my_uses():
            decision = self.decide(use)
            if decision is None:
                continue
            severity, why = decision
            message = self.message.format(what=use.qual, op=use.op, why=why)
            hint = self.hint
            evidence = {"op": use.op, "call": use.qual, "heavy": use.heavy, "function": use.function}
            if use.cpp is not None:
                self.report_cpp(use.cpp[0], use.cpp[1], message, hint, evidence=evidence, severity=severity)
            elif use.node is not None:
                self.report(use.node, message, hint, evidence=evidence, severity=severity)
