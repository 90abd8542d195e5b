from __future__ import annotations

from typing import Optional

import libcst as cst

from gatekeeper.report import Category, Confidence, Severity
from gatekeeper.analyses.memo_keys import Candidate, Frame, MemoRule
from gatekeeper.static.returns import MAYBE, NONE, unwrap
from gatekeeper.static.examples import Invalid, Valid, snippet


class MemoisesByObjectIdentity(MemoRule):
    """Identity caching with `is`: an input is compared by object identity with one kept
    across calls (`if x is self._last_x: return self._last_out`, or `if x is not
    self._last_x: <recompute>` followed by returning the stored output), and a stored
    result is returned when the same object comes back. The same memo kept on the input
    object itself (`x._result = y` on one call, `getattr(x, "_result")` returned on a later
    one) is identity caching too.

    Why it games the benchmark: timing loops pass the same tensor objects on every call, so
    every timed call after the first returns the stored result without computing; an
    in-place change of the input's values is not seen either.

    Known false-positive patterns it does not fire on, and why:
    - `x is None`, `x is self` and comparisons with literals: not a stored input;
    - an identity test that only decides preparation (re-packing a weight when the
      parameter object changed) while the output is computed afresh: nothing stored is
      returned;
    - identity tests outside the functions whose return is the model's output;
    - attributes read from an input that the submission never wrote (`x.shape`, `x.device`).
    When a call the analysis cannot see into runs before the stored result is returned (a
    bound graph replay kept with the input, `plan[1]()`), it may recompute from the same
    object's live contents: the finding is `likely`, and the run-time in-place overwrite
    check (GK611) settles it.
    """

    code = "GK106"
    name = "MemoisesByObjectIdentity"
    category = Category.CACHED_OUTPUT
    severity = Severity.ERROR
    confirmed_by = "GK611"
    summary = "returns a stored result when the input is the same object (`x is self._last`)"
    message = ("The input is compared by identity (`is`) with {container}, kept across calls, and a stored result "
               "({stored}) is returned: calls with the same tensor object skip the computation.")
    hint = "Compute the output from the input's values on every call; do not remember earlier inputs or results on the module."

    VALID = [
        Valid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x, bias=None):
                    if bias is None:
                        bias = self.bias
                    return _ext.run(x, bias)
        """)),
        # re-pack a weight when the parameter object changed; the output is fresh
        Valid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    w = self.weight
                    if w is not self._packed_src:
                        self._packed = pack(w)
                        self._packed_src = w
                    out = torch.empty_like(x)
                    _ext.run(x, self._packed, out)
                    return out
        """)),
    ]
    INVALID = [
        Invalid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    if x is self._last:
                        return self._out
                    self._last = x
                    self._out = _ext.run(x)
                    return self._out
        """), line=4, message="The input is compared by identity (`is`) with self._last"),
        Invalid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    if self._last is not x:
                        self._last = x
                        self._out = _ext.run(x)
                    return self._out.clone()
        """), line=4, message="The input is compared by identity (`is`) with self._last"),
        # the result kept on the input tensor object
        Invalid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    hit = getattr(x, '_res', None)
                    if hit is not None:
                        return hit.clone()
                    y = _ext.run(x)
                    x._res = y
                    return y
        """), line=6, message="forward stores a result on the input tensor object (`x._res = ...`) and returns it when the same"),
    ]
    on_input = ("forward stores a result on the input tensor object (`{param}.{attr} = ...`) and returns it when the "
                "same object comes back: calls with the same tensor skip the computation.")

    lookups = False  # only `is` comparisons

    def key_of(self, expr: cst.BaseExpression, frame: Frame) -> Optional[str]:
        return None

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.input_attrs: list[tuple[str, str]] = []  # (function key, attribute) written on an input
        self.frame_of: dict[str, Frame] = {}

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        super().visit_FunctionDef(node)
        self.frame_of[self.ctx.function_key] = self.frames[-1]

    def visit_Assign(self, node: cst.Assign) -> None:
        super().visit_Assign(node)
        for target in node.targets:
            t = target.target
            if self.frames and type(t) is cst.Attribute and type(t.value) is cst.Name and t.value.value in self.frames[-1].params:
                self.input_attrs.append((self.ctx.function_key, t.attr.value))

    def visit_Comparison(self, node: cst.Comparison) -> None:
        if not self.frames:
            return
        left = node.left
        for target in node.comparisons:
            if type(target.operator) in (cst.Is, cst.IsNot):
                right = target.comparator
                for mine, other in ((left, right), (right, left)):
                    stored = self.flow.tracker.origin(other) if (type(mine) is cst.Name) else None
                    if stored is not None:
                        self.candidates.append(Candidate(self.ctx.function_key, node, stored, (mine, other), self.frames[-1]))
            left = target.comparator

    def _input_attr(self, expr: cst.BaseExpression, frame: Frame, written: set[str], depth: int = 0) -> Optional[tuple[str, str]]:
        """(input, attribute) when expr reads an attribute written on an input."""
        expr = unwrap(expr)
        if type(expr) is cst.Attribute and type(expr.value) is cst.Name and expr.value.value in frame.params \
                and expr.attr.value in written:
            return expr.value.value, expr.attr.value
        if (type(expr) is cst.Call and type(expr.func) is cst.Name and expr.func.value == "getattr" and len(expr.args) >= 2
                and type(expr.args[0].value) is cst.Name and expr.args[0].value.value in frame.params
                and type(expr.args[1].value) is cst.SimpleString and expr.args[1].value.evaluated_value in written):
            return expr.args[0].value.value, str(expr.args[1].value.evaluated_value)
        if type(expr) is cst.Name and depth < 3:
            for value in frame.assigned.get(expr.value, ()):
                found = self._input_attr(value, frame, written, depth + 1)
                if found:
                    return found
        return None

    def finish(self) -> None:
        reaching = self.flow.reaching()
        written: dict[str, set[str]] = {}
        for key, attr in self.input_attrs:
            if key in reaching:
                written.setdefault(key, set()).add(attr)
        for key, attrs in written.items():
            frame = self.frame_of[key]
            for site in self.flow.sites.get(key, ()):
                found = self._input_attr(site.value, frame, attrs)
                if found:
                    self.report(site.node, self.on_input.format(param=found[0], attr=found[1]),
                                evidence={"input": found[0], "attribute": found[1]})
                    break
        for c in self.candidates:
            mine, other = c.exprs
            if c.key not in reaching or not self.is_input(mine, c.frame) or self.is_input(other, c.frame):
                continue
            sites = [s for s in self.flow.sites.get(c.key, ()) if s.stored is not None and s.write in (NONE, MAYBE)]
            if not sites:
                continue
            # certain only when nothing on the way can rewrite it; a stored callable (a bound
            # graph replay) may recompute from the same object's live contents: GK611 settles
            site = min(sites, key=lambda s: s.write != NONE)
            self.report(c.node, self.message.format(container=c.origin, stored=site.stored),
                        evidence={"compared_with": c.origin, "returns": site.stored, "write": site.write},
                        confidence=Confidence.CERTAIN if site.write == NONE else Confidence.LIKELY)
