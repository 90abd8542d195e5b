from __future__ import annotations

import ast
from typing import Optional

import libcst as cst

from gatekeeper.report import Category, Confidence, Severity
from gatekeeper.analyses.call_sites import call_sites, conditional, name_references
from gatekeeper.analyses.own_definitions import delegates_to_own_code
from gatekeeper.analyses.body_fingerprint import fingerprint, import_map, import_map_ast, index_module, reference_fingerprint
from gatekeeper.analyses.reference_names import model_names
from gatekeeper.static.problem_facts import ProblemFacts
from gatekeeper.static.rule import Rule
from gatekeeper.static.walk import subtree
from gatekeeper.static.examples import Invalid, Valid, snippet

# Reference forwards are kept on the problem's facts (which live as long as the problem is
# in use): the problem is the same for many submissions.
_ATTR = "_gk403_forwards"
_UNSET: tuple[int, str] = (-1, "")


class _ReferenceForward:
    """A reference class's forward, read from CPython's tree of the reference (its libcst
    tree is parsed only on demand): its statement shapes and node counts, taken up front, and
    its fingerprint, taken only when a submission's function has one of those shapes and the
    same counts (most never do, so most references are never fingerprinted)."""

    def __init__(self, name: str, node: ast.AST, imports: dict[str, str]) -> None:
        self.name, self.node, self.imports = name, node, imports
        self.shapes, self.counts = _ast_shapes(node), _ast_node_counts(node)
        self._fingerprint: Optional[tuple[int, str]] = _UNSET

    def fingerprint(self) -> Optional[tuple[int, str]]:
        if self._fingerprint is _UNSET:
            self._fingerprint = reference_fingerprint(self.node, self.imports)
        return self._fingerprint


_PROBLEM = (
    "import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    def __init__(self):\n"
    "        super().__init__()\n\n    def forward(self, a, b):\n        c = torch.matmul(a, b)\n"
    "        return torch.relu(c) * 2.0\n\nclass Block(nn.Module):\n    def __init__(self):\n"
    "        super().__init__()\n        self.lin = nn.Linear(64, 64)\n\n    def forward(self, x):\n"
    "        return torch.relu(self.lin(x))\n\ndef get_inputs():\n    return [torch.randn(64, 64), torch.randn(64, 64)]\n"
)


def reference_forwards(problem: ProblemFacts) -> list[_ReferenceForward]:
    """The forward of each class of the reference (not a pasted ModelNew)."""
    cached = problem.__dict__.get(_ATTR)
    if cached is not None:
        return cached
    out: list[_ReferenceForward] = []
    imports = import_map_ast(problem.tree)
    for stmt in problem.tree.body:
        if type(stmt) is ast.ClassDef and stmt.name != "ModelNew":
            for item in stmt.body:
                if type(item) in (ast.FunctionDef, ast.AsyncFunctionDef) and item.name == "forward":
                    out.append(_ReferenceForward(f"{stmt.name}.forward", item, imports))
    problem.__dict__[_ATTR] = out
    return out


# CPython statement kinds by the name of the libcst kind each parses to (`_shape`'s names).
_KIND = {ast.Delete: "Del", ast.AsyncFor: "For", ast.AsyncWith: "With", ast.AsyncFunctionDef: "FunctionDef"}


def _ast_shapes(node: ast.AST) -> tuple[tuple[str, ...], ...]:
    """The shapes `_shape` gives the libcst parse of the same function: one, or two where
    the first statement is a string expression (libcst drops it as a docstring unless it
    shares its line with another statement or the body is on the `def` line, which CPython's
    tree does not tell; a superset never drops a match, as the fingerprint decides)."""
    body = node.body  # type: ignore[attr-defined]
    kinds = tuple(_KIND.get(type(s), type(s).__name__) for s in body)
    first = body[0] if body else None
    if type(first) is ast.Expr and (type(first.value) is ast.JoinedStr or (
            type(first.value) is ast.Constant and type(first.value.value) in (str, bytes))):
        return (kinds, kinds[1:])
    return (kinds,)


# `_COUNTED`'s libcst types by the CPython node each stands for; a number is a Constant
# holding an int (not a bool), a float or a complex.
_AST_COUNTED = {ast.Call: 0, ast.BinOp: 1, ast.Subscript: 2, ast.Compare: 3, ast.UnaryOp: 4, ast.List: 6,
                ast.Dict: 7, ast.Lambda: 8, ast.IfExp: 9, ast.ListComp: 10, ast.SetComp: 11, ast.DictComp: 12,
                ast.GeneratorExp: 13}
_NUMBERS = (int, float, complex)


def _ast_node_counts(node: ast.AST) -> tuple[int, ...]:
    counts = [0] * (_SELF + 1)
    slot = _AST_COUNTED.get
    for stmt in node.body:  # type: ignore[attr-defined]
        for inner in ast.walk(stmt):
            kind = type(inner)
            index = slot(kind)
            if index is not None:
                counts[index] += 1
            elif kind is ast.Constant and type(inner.value) in _NUMBERS:
                counts[5] += 1
            elif kind is ast.Attribute and type(inner.value) is ast.Name and inner.value.id == "self":
                counts[_SELF] += 1
    return tuple(counts)


def _shape(node: cst.FunctionDef) -> tuple[str, ...]:
    """The body's statement kinds in order, not counting a docstring (as the fingerprint
    drops it). Each libcst statement kind stands for one kind of CPython ast statement, so
    equal fingerprints have equal shapes; most functions already differ here, which spares
    the fingerprint."""
    body = node.body.body if (type(node.body) is cst.IndentedBlock) else [node.body]
    kinds: list[str] = []
    for s in body:
        if type(s) in (cst.SimpleStatementLine, cst.SimpleStatementSuite):
            kinds.extend(type(small).__name__ for small in s.body)
        else:
            kinds.append(type(s).__name__)
    first = body[0] if body else None
    if (type(first) is cst.SimpleStatementLine and len(first.body) == 1 and type(first.body[0]) is cst.Expr
            and type(first.body[0].value) in (cst.SimpleString, cst.ConcatenatedString)):
        kinds = kinds[1:]
    return tuple(kinds)


# libcst node types that each stand for exactly one CPython ast node (Call, BinOp, Subscript,
# Compare, UnaryOp, a number Constant, List, Dict, Lambda, IfExp, comprehensions): equal
# fingerprints (ast dumps) have equal counts of them, which are much cheaper to take than a
# fingerprint, so a body whose counts differ is not a copy. Not counted: names and
# attributes (the fingerprint spells imports out), strings (adjacent literals are one
# Constant), tuples (`a[1, 2]` has an ast Tuple and no libcst one), boolean chains.
_COUNTED = {cst.Call: 0, cst.BinaryOperation: 1, cst.Subscript: 2, cst.Comparison: 3, cst.UnaryOperation: 4,
            cst.Integer: 5, cst.Float: 5, cst.Imaginary: 5, cst.List: 6, cst.Dict: 7, cst.Lambda: 8,
            cst.IfExp: 9, cst.ListComp: 10, cst.SetComp: 11, cst.DictComp: 12, cst.GeneratorExp: 13}


# Also counted: attributes of `self` (`self.w`). The fingerprint renames their attribute
# but keeps each one an attribute of `self`, and makes no new one (renamed names are `_vN`
# or import paths), so equal fingerprints have equal numbers of them. This is what tells a
# forward calling `self.ext.kernel(a, b)` from the reference's `torch.matmul(a, b)` (same
# shape and counts otherwise): most candidates left by the counts above, spared a
# fingerprint and the file's CPython parse.
_SELF = max(_COUNTED.values()) + 1


def _node_counts(node: cst.FunctionDef) -> tuple[int, ...]:
    counts = [0] * (_SELF + 1)
    slot = _COUNTED.get
    for inner in subtree(node.body):
        kind = type(inner)
        index = slot(kind)
        if index is not None:
            counts[index] += 1
        elif kind is cst.Attribute and type(inner.value) is cst.Name and inner.value.value == "self":
            counts[_SELF] += 1
    return tuple(counts)


class CopiesReferenceForward(Rule):
    """A function in the submission has the same body as the reference's `forward` once
    names are normalised: parameters and locals renamed positionally, `self.` attributes
    renamed, imports spelled out (`F.relu` = `torch.nn.functional.relu`), formatting,
    comments and docstrings ignored. Needs the problem file.

    Why it games the benchmark: the pasted body is the reference's PyTorch computation;
    renaming variables does not make it the submission's own kernel.

    Not flagged: a pasted `class Model` itself (kept for a self-test; GK400/GK401 report it
    if it is used), and bodies that differ in any operation, argument or constant.

    Known false-positive pattern, not flagged: a `forward` whose text is the reference's
    but whose layers are the submission's own. Level-3 submissions keep the reference's
    `x = self.features(x); x = self.classifier(x)` and build `self.features` in `__init__`
    from their own fused modules (`FusedConvReLU`, a class calling a `load_inline`
    extension), or call a module-level helper the submission rewrote. Same text, other
    computation: the copy is reported only when nothing the body names or reads (a
    top-level name, a `self.` attribute traced through `__init__`, its locals and helper
    methods, and bases the submission defines) is built from the submission's own code
    (own_definitions.py). Torch layers the body still runs are the GK3xx rules' business.

    A copy of a reference helper class's forward (`WindowAttention.forward` pasted as
    `WindowAttentionNew.forward`, with torch layers) is `suspect`: torch doing part of the
    work, which KernelBench allows next to the submission's own kernels (a warning under
    `default`, confirmed by who did the work at run time). A copy of `Model.forward` stays
    certain where it can run in the model's call. A copy that only runs outside it (an
    import-time self-test that compares the kernel with the formula, code reached only from
    `__init__` or `if __name__ == "__main__":`, a function nothing calls or names) is likely
    only: it computes no output. A function whose name appears anywhere beyond its calls
    (a dict, `getattr`, a stored callable) counts as reaching the call (forward_path.py).
    """

    code = "GK403"
    name = "CopiesReferenceForward"
    category = Category.REFERENCE_REUSE
    severity = Severity.ERROR
    needs_problem = True
    # A copy that is not certain to run in the timed call (a guarded fallback, a helper block,
    # a self-test) is settled by who did the timed work.
    confirmed_by = "GK667"
    summary = "a function's body is the reference forward with names changed"
    message = "`{func}` has the same body as the reference's `{ref}` after renaming: it runs the reference computation."
    outside_note = (" Nothing in the model's call reaches it (a self-test, set-up or unused code), so it is "
                    "held as likely, not certain.")
    guarded_note = (" Every call of it sits behind a condition (a fallback beside the kernel): held as likely, "
                    "and the run-time check of who did the timed work (GK667) settles it.")
    hint = (
        "Replace the copied PyTorch body with a call to your own kernel (for example an "
        "extension built with `load_inline`) that computes the same result."
    )
    EXAMPLE_PROBLEM = _PROBLEM
    VALID = [
        # the reference block's forward text, but its layer is the submission's own module,
        # built through a local list in `__init__`
        Valid(snippet("""
            import torch
            class FusedLinear(torch.nn.Module):
                def forward(self, x):
                    return _ext.linear(x)
            class BlockNew(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    layers = []
                    layers.append(FusedLinear())
                    self.fc = torch.nn.Sequential(*layers)
                def forward(self, y):
                    return torch.relu(self.fc(y))
        """)),
        Valid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, a, b):
                    return _ext.matmul_relu_scale(a, b, 2.0)
        """)),
        Valid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, a, b):
                    c = torch.matmul(a, b)
                    return torch.relu(c) * 3.0
        """)),
        Valid(snippet("""
            import torch
            import torch.nn as nn
            class Model(nn.Module):
                def forward(self, a, b):
                    c = torch.matmul(a, b)
                    return torch.relu(c) * 2.0
        """)),
    ]
    INVALID = [
        Invalid(snippet('''
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x, w):
                    """Fused matmul + relu."""
                    y = torch.matmul(x, w)  # fast path
                    return torch.relu(y) * 2.0
        '''), line=3, message="`ModelNew.forward` has the same body as the reference's `Model.forward` after renaming"),
        Invalid(snippet("""
            from torch import matmul as mm, relu
            class ModelNew:
                def forward(self, p, q):
                    t = mm(p, q)
                    return relu(t) * 2.0
        """), line=3, message="`ModelNew.forward` has the same body as the reference's `Model.forward` after renaming"),
        Invalid(snippet("""
            import torch as T
            def _fallback(a, b):
                r = T.matmul(a, b)
                return T.relu(r) * 2.0
        """), line=2, message="`_fallback` has the same body as the reference's `Model.forward` after renaming"),
        # a copy reached only behind a guard, next to the launch: likely, settled at run time
        Invalid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def _reference(self, a, b):
                    c = torch.matmul(a, b)
                    return torch.relu(c) * 2.0
                def forward(self, a, b):
                    if a.shape[1] % 32:
                        return self._reference(a, b)
                    return _ext.matmul_relu_scale(a, b, 2.0)
        """), line=3, message="Every call of it sits behind a condition"),
        # the reference block's layers and forward; an unused own attribute does not change that
        Invalid(snippet("""
            import torch
            class BlockNew(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc = torch.nn.Linear(64, 64)
                    self.k = _ext
                def forward(self, y):
                    return torch.relu(self.fc(y))
        """), line=7, message="`BlockNew.forward` has the same body as the reference's `Block.forward` after renaming"),
    ]

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._reference: Optional[list[_ReferenceForward]] = None
        self._imports: Optional[dict[str, str]] = None
        self._indexed = False
        self._skip = model_names(self.ctx) - {"ModelNew"}
        self._copies: list[tuple[cst.FunctionDef, str, str, str, Optional[Confidence]]] = []

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        if self.ctx.problem is None or (self.ctx.class_name in self._skip and self.ctx.class_name is not None):
            return
        if self._reference is None:
            self._reference = reference_forwards(self.ctx.problem)
        if not self._reference:
            return
        shape = _shape(node)
        if not any(shape in ref.shapes for ref in self._reference):
            return
        counts = _node_counts(node)
        # Equal fingerprints have equal shapes and counts (tests/test_gk403_count_prefilter.py),
        # so only these references can match.
        if self._imports is None:
            self._imports = import_map(self.ctx.module)
        # A module that imports a name `self` has its `self.a.b` spelled out as an import path
        # by the fingerprint: the count of `self` attributes holds only without one.
        plain = "self" not in self._imports
        candidates = [ref for ref in self._reference if shape in ref.shapes and (
            counts == ref.counts if plain and "self" not in ref.imports else counts[:_SELF] == ref.counts[:_SELF])]
        if not candidates:
            return
        if not self._indexed:
            self._indexed = True
            index_module(self.ctx.module, self.ctx.text)
        mine = fingerprint(node, self._imports)
        if mine is None:
            return
        for candidate in candidates:
            if candidate.fingerprint() == mine:
                ref = candidate.name
                cls = self.ctx.classes[-1] if self.ctx.classes else None
                if delegates_to_own_code(self.ctx, cls, node):
                    return
                # A helper block's forward (`WindowAttention`) is torch doing part of the work,
                # which KernelBench allows; the model's own forward is the whole computation.
                confidence = None if ref.split(".")[0] == "Model" else Confidence.SUSPECT
                func = f"{self.ctx.class_name}.{node.name.value}" if self.ctx.class_name else node.name.value
                # whether it runs in the model's call is known once the call graph is whole
                self._copies.append((node, self.ctx.function_key, func, ref, confidence))
                return

    def finish(self) -> None:
        sites = call_sites(self.ctx, {key for _, key, *_ in self._copies}) if self._copies else {}
        for node, key, func, ref, confidence in self._copies:
            message, evidence = self.message.format(func=func, ref=ref), {"reference": ref}
            calls = sites.get(key, [])
            if self.ctx.is_init_only(key):
                message += self.outside_note
                evidence["runs"] = "outside the model's call"
                confidence = Confidence.LIKELY if confidence is None else confidence
            elif calls and not node.name.value == "forward" and all(conditional(self.ctx, c) for c, _ in calls) \
                    and len(calls) == name_references(self.ctx.module, {node.name.value})[node.name.value] - 1:
                # `if not fits: return self._reference(x)` next to a launch: a fallback, which runs
                # on the benchmark's calls only if the guard picks it; who did the timed work is
                # measured (GK667). Only where every reference to the name is a guarded call.
                message += self.guarded_note
                evidence["runs"] = "only behind a condition"
                confidence = Confidence.LIKELY if confidence is None else confidence
            self.report(node, message, evidence=evidence, confidence=confidence)
