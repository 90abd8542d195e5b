from __future__ import annotations

from typing import Optional

import libcst as cst

from gatekeeper.report import Category, Severity
from gatekeeper.rules.gk1xx_memo import Candidate, Frame, MemoRule
from gatekeeper.static.returns import NONE


class MemoisesByObjectIdentity(MemoRule):
    """Identity caching with `is`: an input is compared by object identity with one kept
    across calls (`if x is self._last_x: return self._last_out`, or `if x is not
    self._last_x: <recompute>` followed by returning the stored output), and a stored
    result is returned when the same object comes back.

    Why it games the benchmark: timing loops pass the same tensor objects on every call, so
    every timed call after the first returns the stored result without computing; an
    in-place change of the input's values is not seen either.

    Known false-positive patterns it does not fire on, and why:
    - `x is None`, `x is self` and comparisons with literals: not a stored input;
    - an identity test that only decides preparation (re-packing a weight when the
      parameter object changed) while the output is computed afresh: nothing stored is
      returned;
    - identity tests outside the functions whose return is the model's output.
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
        "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x, bias=None):\n        if bias is None:\n"
        "            bias = self.bias\n        return _ext.run(x, bias)\n",
        # re-pack a weight when the parameter object changed; the output is fresh
        "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        w = self.weight\n"
        "        if w is not self._packed_src:\n            self._packed = pack(w)\n            self._packed_src = w\n"
        "        out = torch.empty_like(x)\n        _ext.run(x, self._packed, out)\n        return out\n",
    ]
    INVALID = [
        "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        if x is self._last:\n"
        "            return self._out\n        self._last = x\n        self._out = _ext.run(x)\n        return self._out\n",
        "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        if self._last is not x:\n"
        "            self._last = x\n            self._out = _ext.run(x)\n        return self._out.clone()\n",
    ]

    lookups = False  # only `is` comparisons

    def key_of(self, expr: cst.BaseExpression, frame: Frame) -> Optional[str]:
        return None

    def visit_Comparison(self, node: cst.Comparison) -> None:
        if not self.frames:
            return
        left = node.left
        for target in node.comparisons:
            if isinstance(target.operator, (cst.Is, cst.IsNot)):
                right = target.comparator
                for mine, other in ((left, right), (right, left)):
                    stored = self.flow.tracker.origin(other) if isinstance(mine, cst.Name) else None
                    if stored is not None:
                        self.candidates.append(Candidate(self.ctx.function_key, node, stored, (mine, other), self.frames[-1]))
            left = target.comparator

    def finish(self) -> None:
        reaching = self.flow.reaching()
        for c in self.candidates:
            mine, other = c.exprs
            if c.key not in reaching or not self.is_input(mine, c.frame) or self.is_input(other, c.frame):
                continue
            stored = next((s.stored for s in self.flow.sites.get(c.key, ()) if s.stored is not None and s.write == NONE), None)
            if stored is None:
                continue
            self.report(c.node, self.message.format(container=c.origin, stored=stored),
                        evidence={"compared_with": c.origin, "returns": stored})
