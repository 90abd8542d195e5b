"""Per-file state shared by all rules during the one traversal. Findings go to the file's
FindingStore (findings.py), which knows nothing of this module or of rule.py."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, Union

import libcst as cst

from gatekeeper.report import Finding
from gatekeeper.static.cpp_sources import CppSource
from gatekeeper.static.findings import FindingStore, RuleFacts
from gatekeeper.static.names import NameResolver
from gatekeeper.static.problem_facts import ProblemFacts

MODULE_KEY = "<module>"


@dataclass
class FileContext:
    path: str
    text: str
    module: cst.Module
    profile: str
    problem: Optional[ProblemFacts]
    folder: Union[Path, None, Callable[[], Optional[Path]]]  # side files' folder, or how to find it
    resolver: NameResolver = field(default_factory=NameResolver)
    parents: dict[cst.CSTNode, cst.CSTNode] = field(default_factory=dict)
    # Enclosing definitions, innermost last.
    functions: list[cst.FunctionDef] = field(default_factory=list)
    classes: list[cst.ClassDef] = field(default_factory=list)
    function_keys: list[str] = field(default_factory=list)
    # Module-level `NAME = value` (every value assigned, in order).
    constants: dict[str, list[cst.BaseExpression]] = field(default_factory=dict)
    cpp_sources: list[CppSource] = field(default_factory=list)
    calls: dict[str, set[str]] = field(default_factory=dict)  # callee -> callers
    defined: set[str] = field(default_factory=set)
    _qualnames: dict[int, tuple] = field(default_factory=dict, repr=False)

    # structure ---------------------------------------------------------------
    def parent(self, node: cst.CSTNode) -> Optional[cst.CSTNode]:
        return self.parents.get(node)

    def ancestors(self, node: cst.CSTNode):
        current = self.parents.get(node)
        while current is not None:
            yield current
            current = self.parents.get(current)

    @property
    def function_key(self) -> str:
        return self.function_keys[-1] if self.function_keys else MODULE_KEY

    @property
    def class_name(self) -> Optional[str]:
        return self.classes[-1].name.value if self.classes else None

    def qualname(self, expr: Optional[cst.BaseExpression]) -> Optional[str]:
        # The answer depends on the bindings seen so far (a rule may resolve a node before
        # the traversal reaches it), so it is remembered per resolver epoch: the dozens of
        # rules that visit one call resolve its callee once.
        epoch = self.resolver.epoch
        hit = self._qualnames.get(id(expr))
        if hit is not None and hit[0] == epoch and hit[1] is expr:
            return hit[2]
        value = self.resolver.qualname(expr)
        self._qualnames[id(expr)] = (epoch, expr, value)
        return value

    def in_method(self, name: str, cls: Optional[str] = None) -> bool:
        if not self.functions or self.functions[-1].name.value != name:
            return False
        return cls is None or self.class_name == cls

    def is_init_only(self, key: str) -> bool:
        """True when `key` does not run inside the model's call: `__init__`, module level,
        harness glue, or functions only those reach (see static/forward_path.py)."""
        from gatekeeper.static.forward_path import in_forward

        return not in_forward(self, key)

    # findings (kept in findings.FindingStore) --------------------------------------
    def __post_init__(self) -> None:
        self.findings = FindingStore(self.path, self.text, self.module, self.profile, self.parents)

    def add_finding(self, rule: RuleFacts, **kwargs: Any) -> None:
        self.findings.add(rule, **kwargs)

    def materialise(self) -> list[Finding]:
        return self.findings.materialise()

    def line_text(self, line: int) -> str:
        return self.findings.line_text(line)
