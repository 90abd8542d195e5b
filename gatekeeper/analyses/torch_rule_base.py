"""The base class of the GK3xx torch-fallback rules: feeding the shared `TorchUsage`, and
the severity policy. Not a rule file: it defines no rule with a `code`.

The policy is data: rules/torch_policy.toml gives, per profile, the severity and the
confidence of each situation; the first that applies wins:

1. the configuration's `allow` option or the problem's `allowed_ops` name the op: no finding;
2. the problem forbids the op (sidecar `forbidden`, problem.yaml `forbidden`);
3. the forward path launches no kernel of its own that does real work (none at all, only
   in `__init__`, only token launches on constant slivers such as `x[:1]`, or only launches
   whose output never reaches the result); `likely` instead when a file that builds code of
   its own calls, on the forward path, a callable fetched at run time (`getattr(mod, name)`,
   `OPS[name]`) that gatekeeper cannot follow (`no_own_kernel_unseen`);
4. torch computes every op family of the reference (with --problem) and the own kernels
   only move data: torch does the whole op;
5. an op the reference computes; 6. a heavy op; 7. other glue.

Under `default`, 5-7 are `suspect` (KernelBench accepts a ModelNew that keeps cuDNN's
conv or cuBLAS's matmul next to its own fused kernel); the run-time work-attribution check
(`confirmed_by`) says whether torch did the timed work. `strict` makes all of them errors.
A severity set for the rule in the configuration (`[rules.GK301] severity = ...`) replaces
the table when it differs from the profile's default for the rule.
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Any, Optional

import libcst as cst

from gatekeeper.errors import UsageError
from gatekeeper.report import Category, Confidence, Severity
from gatekeeper.analyses.torch_policy_table import policy, render_table
from gatekeeper.analyses.problem_ops import problem_ops
from gatekeeper.analyses.torch_usage import TorchUsage, Use
from gatekeeper.static.cpp_sources import CppSource
from gatekeeper.static.rule import Rule


def _matches(use: Use, patterns: tuple[str, ...] | list[str]) -> bool:
    if not patterns:
        return False
    names = (use.qual, use.op, use.qual.rsplit(".", 1)[-1], use.qual.rsplit("::", 1)[-1])
    return any(fnmatchcase(name, pattern) for pattern in patterns for name in names)


_FEEDING = ("visit_FunctionDef", "leave_FunctionDef", "visit_Call", "visit_ClassDef", "visit_Assign", "visit_AnnAssign", "visit_For",
            "visit_BinaryOperation", "visit_AugAssign", "visit_UnaryOperation")


class TorchFallbackRule(Rule):
    """Shared machinery; subclasses set `kinds` (which uses they report) and the texts."""

    category = Category.TORCH_FALLBACK
    severity = Severity.ERROR
    strict_severity = Severity.ERROR
    confirmed_by = policy().confirmed_by
    # The rows of torch_policy.toml this rule's docs show.
    situations: tuple[str, ...] = ("forbidden", "no_own_kernel", "no_own_kernel_unseen", "torch_does_whole_op", "reference_op",
                                   "heavy_op", "glue")

    @classmethod
    def docs(cls) -> str:
        if not cls.situations:  # a rule outside the policy table (GK309 decides its own confidence)
            return (cls.__doc__ or "").strip()
        table = render_table(cls.situations)
        return f"{(cls.__doc__ or '').strip()}\n\nPolicy (rules/torch_policy.toml):\n\n{table}"
    options: dict[str, Any] = {"allow": []}
    kinds: tuple[str, ...] = ()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.usage, self.feeds = TorchUsage.of(self.ctx)
        if not self.feeds:
            # Only the first GK3xx rule feeds the shared usage: the engine skips handlers set
            # to None, so the others cost nothing per node.
            self.switch_off_inherited(TorchFallbackRule, _FEEDING)
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

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        if self.feeds and node.keywords:
            self.usage.class_keywords(node)

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
        return _matches(use, self.allow)

    def decide(self, use: Use) -> Optional[tuple[Severity, Confidence, str]]:
        """(severity, confidence, why) for a use, or None when it is allowed."""
        if self.allowed(use) or _matches(use, problem_ops(self.ctx.problem).allowed):
            return None
        profile = self.ctx.profile
        situation, why = self.situation(use)
        verdict = policy().verdict(situation, profile)
        if self.active_severity != type(self).severity_for(profile):
            return self.active_severity, verdict.confidence, "its severity is set in the configuration"
        return verdict.level, verdict.confidence, why

    def situation(self, use: Use) -> tuple[str, str]:
        """Which row of the policy table applies to a use, and why, in words."""
        usage = self.usage
        facts = problem_ops(self.ctx.problem)
        if _matches(use, facts.forbidden):
            return "forbidden", f"the problem forbids `{use.op}` (its `forbidden` list), so it must be the submission's own"
        kernel = usage.own_kernel
        if kernel is None and not (use.cpp is not None and usage.has_cuda_kernel):
            if usage.opaque_calls and usage.builds_own_code:
                return "no_own_kernel_unseen", (
                    f"the forward path launches no kernel gatekeeper can see, but it calls `{usage.opaque_calls[0]}`, "
                    "a callable fetched at run time that may be the file's own kernel; the run-time check says "
                    "whether torch did the timed work")
            if usage.idle_kernels:
                return "no_own_kernel", (f"the only kernel launches (`{usage.idle_kernels[0].what}`) never reach the "
                                         "result (a self-test or warm-up whose output is dropped), so torch does the "
                                         "work being timed")
            if usage.token_kernels:
                return "no_own_kernel", (f"the only kernel launches (`{usage.token_kernels[0].what}`) run on a constant "
                                         "sliver of the data, so torch does the work being timed")
            return "no_own_kernel", "the forward path launches no kernel of its own, so torch does the work being timed"
        if usage.torch_does_whole_op():
            return "torch_does_whole_op", ("torch (or a vendor library) computes every op the reference computes, as "
                                           "often as the reference does, so the submission's own kernel does none of "
                                           "the reference's work (it copies, transposes, or never runs)")
        where = f" `{kernel.what}`" if kernel is not None else ""
        if self.ctx.problem is not None and policy().family(use.op) in facts.reference:
            return "reference_op", (f"`{use.op}` is part of what the reference computes; KernelBench accepts torch for "
                                    f"part of the work next to the own kernel{where}, strict does not, and the run-time "
                                    "check says whether torch did the timed work")
        if use.heavy:
            return "heavy_op", (f"`{use.op}` is a reduction, contraction or other heavy op next to the own kernel{where}: "
                                "allowed for part of the work under default, rejected under strict")
        return "glue", (f"it looks like glue around the submission's own kernel{where}, tolerated under the default and "
                        "lenient profiles and rejected under strict")

    def my_uses(self) -> list[Use]:
        self.usage.resolve()
        return [u for u in self.usage.uses if u.kind in self.kinds and u.fallback is None]

    def finish(self) -> None:
        for use in self.my_uses():
            decision = self.decide(use)
            if decision is None:
                continue
            severity, confidence, why = decision
            # the count of other layers is prose, so it sits outside the quoted `{what}`
            more = f" (and {use.more_layers} more torch.nn layer{'s' if use.more_layers > 1 else ''})" if use.more_layers else ""
            message = self.message.format(what=use.qual, op=use.op, why=why, more=more)
            library = use.qual.split(".", 1)[0]
            if library in ("numpy", "cupy", "cupyx", "jax", "dpnp", "scipy"):  # the library that computes it is not torch
                message = message.replace("so torch computes", f"so {library} computes", 1)
            hint = self.hint
            # the policy row, for settling: a held "whole op" suspicion that the run-time classes
            # confirm with a library majority is the whole op (gatekeeper/settle.py)
            evidence = {"op": use.op, "call": use.qual, "heavy": use.heavy, "function": use.function,
                        "situation": self.situation(use)[0]}
            if use.cpp is not None:
                self.report_cpp(use.cpp[0], use.cpp[1], message, hint, evidence=evidence, severity=severity,
                                confidence=confidence)
            elif use.node is not None:
                self.report(use.node, message, hint, evidence=evidence, severity=severity, confidence=confidence)
