from __future__ import annotations

from typing import Optional

import libcst as cst

from gatekeeper.report import Category, Confidence, Severity
from gatekeeper.analyses.cpp_postfix import chain_root
from gatekeeper.analyses.integer_inputs import integer_parameters, problem_integer_positions
from gatekeeper.analyses.stream_support import call_args, idents
from gatekeeper.static.cpp_sources import CppSource
from gatekeeper.static.rule import Rule
from gatekeeper.static.walk import subtree
from gatekeeper.static.examples import Invalid, Valid, snippet

# Methods that turn tensor values into something a Python condition can test. Metadata
# (`shape`, `size()`, `numel()`, `dtype`, `is_cuda`, `is_contiguous()`, `stride()`,
# `data_ptr()`) is not here: branching on it is ordinary dispatch.
VALUE_METHODS = frozenset({
    "item", "tolist", "any", "all", "max", "min", "amax", "amin", "aminmax", "std", "var", "mean",
    "sum", "norm", "count_nonzero", "median", "prod", "equal", "allclose", "nansum", "nanmean",
})
VALUE_FUNCTIONS = frozenset(f"torch.{name}" for name in (
    "any", "all", "max", "min", "amax", "amin", "std", "var", "mean", "sum", "norm", "count_nonzero",
    "median", "prod", "equal", "allclose", "linalg.norm", "linalg.vector_norm", "std_mean", "var_mean",
))
# What a cheap path returns when it skips the computation.
_SHORTCUTS = frozenset({
    "torch.zeros_like", "torch.zeros", "torch.empty_like", "torch.empty", "torch.ones_like", "torch.ones",
    "torch.full_like", "torch.full",
})
_SHORTCUT_METHODS = frozenset({"clone", "new_zeros", "new_empty", "new_ones", "zero_", "detach", "new_full"})
_ELEMENTWISE = frozenset({"torch.abs", "torch.flatten", "torch.isnan", "torch.isinf", "torch.eq", "torch.ne",
                         "torch.isfinite", "torch.square"})
_CPP_REDUCTIONS = frozenset({"max", "amax", "min", "amin", "std", "var", "mean", "sum", "norm", "any", "all", "abs"})


class BranchesOnInputValues(Rule):
    """A condition on the forward path reads the *values* of an input tensor to choose a
    path: `if x.abs().amax() < 0.5:`, `if x[0].item() == 0:`, `if torch.all(x == 0):`,
    `scale = x.std(); ... if scale < 1e-3:`, or in C++ `if (x.abs().max().item<float>() < 0.5f)`.

    Why it games the benchmark: benchmark inputs come from one distribution
    (`torch.randn`). A branch that sniffs a magnitude, a sampled std or a zero element can
    take a cheaper path that is only right for that distribution (dropping terms, a low
    precision path, skipping the work on "all zeros"), and pass the check while being wrong
    for the inputs the problem accepts.

    Confidence: `suspect` (a warning under `default`), confirmed by the run-time value
    distribution trials (GK673, SniffsInputValues), which feed the same problem inputs from
    other distributions. When the path taken is plainly a shortcut (it returns the input,
    `torch.zeros_like(...)`, a `clone()` or a constant) it is `likely`: an error.

    Known false-positive patterns it does not fire on, and why: metadata dispatch
    (`x.is_cuda`, `x.dtype`, `x.shape[0] > 4096`, `x.is_contiguous()`, `x.numel() == 0`):
    not values; a branch whose body only raises or asserts (`if torch.isnan(x).any():
    raise ValueError`): validation, no cheaper path; value reads in `__init__` or at import
    (weights preprocessed once) and of tensors that are not the function's parameters or
    derived from them (`self.weight.abs().max()`); `if self.training`; the values of the
    problem's integer inputs (a `torch.randint`/`arange` or integer-dtype input in
    `get_inputs()`: lengths, offsets, indices), which size the work (`max(lengths)` picks a
    split count), followed into the helpers forward hands them to. A parameter defaulting
    to None (`out=None`) is an output buffer: returning it is not "the input itself".
    """

    code = "GK540"
    name = "BranchesOnInputValues"
    category = Category.INCORRECT
    severity = Severity.ERROR
    confidence = Confidence.SUSPECT
    confirmed_by = "GK673"
    summary = "forward branches on the values of an input to pick a cheaper path"
    message = (
        "This condition reads the values of the input `{name}` ({how}) on every call to choose a path: "
        "a path that is right only for benchmark-like values (one distribution, no zeros, small "
        "magnitudes) passes the check and is wrong on other inputs the problem accepts.{shortcut}"
    )
    shortcut_note = " The path it picks returns {what} without computing the result."
    hint = (
        "Take the same general path for every input. If a special case is real (exact zeros), check it "
        "over the whole input and compute the same result on both paths; do not sample or guess from "
        "a magnitude or a std."
    )
    # x is float data, lengths integer metadata (randint): its values are the work's size
    EXAMPLE_PROBLEM = (
        "import torch\nROWS = 40\nMAXLEN = 5000\n"
        "def get_inputs():\n"
        "    return [torch.randn(ROWS, MAXLEN), torch.randint(1, MAXLEN + 1, (ROWS,), dtype=torch.int32)]\n"
    )
    VALID = [
        # a split count from the longest row (integer metadata) picks one of two full kernels;
        # `out=None` is an output buffer, not an input returned unchanged
        Valid(snippet("""
            import torch
            def _launch(x, lens, out=None):
                if out is None:
                    out = torch.zeros(x.shape[0], device=x.device)
                splits = max(1, int(lens.max().item()) // 2048)
                if splits == 1:
                    _ext.one_pass(x, lens, out)
                    return out
                _ext.split(x, lens, out, splits)
                return out
            class ModelNew(torch.nn.Module):
                def forward(self, x, lengths):
                    return _launch(x.contiguous(), lengths)
        """)),
        Valid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    if not x.is_contiguous() or x.shape[0] > 4096:
                        x = x.contiguous()
                    return _ext.run(x)
        """)),
        Valid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    if torch.isnan(x).any():
                        raise ValueError('NaN input')
                    return _ext.run(x)
        """)),
        Valid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def __init__(self, w):
                    super().__init__()
                    self.w = w
                    self.sparse = bool((w == 0).float().mean() > 0.9)
                def forward(self, x):
                    if self.w.abs().max() > 1:
                        return _ext.big(x, self.w)
                    return _ext.run(x, self.w)
        """)),
    ]
    INVALID = [
        # the same shape of code sniffing the float data instead of the lengths
        Invalid(snippet("""
            import torch
            def _launch(x, lens, out=None):
                if out is None:
                    out = torch.zeros(x.shape[0], device=x.device)
                if x.abs().amax() < 1e-3:
                    return out
                _ext.full(x, lens, out)
                return out
            class ModelNew(torch.nn.Module):
                def forward(self, x, lengths):
                    return _launch(x.contiguous(), lengths)
        """), line=5, message="reads the values of the input `x`"),
        Invalid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    if x.abs().amax() < 0.5:
                        return _ext.low_order(x)
                    return _ext.full(x)
        """), line=4, message="This condition reads the values of the input `x` (`.amax()`)"),
        Invalid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, a, b):
                    if a[0, 0].item() == 0 and torch.all(a == 0):
                        return torch.zeros_like(b)
                    return _ext.matmul(a, b)
        """), line=4, message="This condition reads the values of the input `a` (`.item()`)"),
        Invalid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    sample = x.flatten()[:1024]
                    s = sample.std()
                    return _ext.fast(x) if s < 1.5 else _ext.exact(x)
        """), line=6, message="This condition reads the values of the input `s` (`s` holds a value computed from it)"),
        Invalid(snippet("""
            src = r'''
            torch::Tensor f(torch::Tensor x) {
              if (x.abs().max().item<float>() < 0.5f) return fast(x);
              return exact(x);
            }
            '''
        """), line=3, message="reads the values of the input `x` (a reduction read back with `.item()`)"),
        Invalid(snippet("""
            src = r'''
            torch::Tensor f(torch::Tensor inp) {
              if (torch::abs(inp).max().item<float>() < 0.5f) return fast(inp);
              return exact(inp);
            }
            '''
        """), line=3, message="reads the values of the input `inp` (a reduction read back with `.item()`)"),
    ]

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # per function (innermost last): parameter-derived locals, and locals holding a value read
        self.derived: list[set[str]] = []
        self.outputs: list[set[str]] = []
        self.int_params: Optional[dict[int, set[str]]] = None
        self.scalars: list[set[str]] = []
        self.hits: list[tuple[str, cst.CSTNode, str, str, Optional[str]]] = []

    # scopes -----------------------------------------------------------------------------
    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        params = {p.name.value for p in (*node.params.posonly_params, *node.params.params, *node.params.kwonly_params)}
        params.discard("self")
        params.discard("cls")
        # integer metadata (lengths, offsets) sizes the work: branching on it is dispatch
        params -= self._integer_params().get(id(node), set())
        # `out=None`: an output buffer the caller may pass, not an input a shortcut returns
        self.outputs.append({p.name.value for p in (*node.params.params, *node.params.kwonly_params)
                             if type(p.default) is cst.Name and p.default.value == "None"})
        self.derived.append(params)
        self.scalars.append(set())

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.derived.pop()
        self.outputs.pop()

    def _integer_params(self) -> dict[int, set[str]]:
        if self.int_params is None:
            problem = self.ctx.problem
            self.int_params = integer_parameters(
                self.ctx.module, problem.entry, problem_integer_positions(problem)) if problem is not None else {}
        return self.int_params
        self.scalars.pop()

    def visit_Assign(self, node: cst.Assign) -> None:
        if not self.derived or len(node.targets) != 1 or type(node.targets[0].target) is not cst.Name:
            return
        name = node.targets[0].target.value
        if self._value_read(node.value) is not None:
            self.scalars[-1].add(name)
        elif self._root(node.value) is not None:
            self.derived[-1].add(name)

    # tracing ------------------------------------------------------------------------------
    def _root(self, expr: cst.BaseExpression) -> Optional[str]:
        """The parameter-derived name an expression is a view or elementwise function of."""
        current = expr
        for _ in range(12):
            if type(current) is cst.Name:
                return current.value if current.value in self.derived[-1] else None
            if type(current) is cst.Subscript:
                current = current.value
            elif type(current) is cst.Call and current.args and self.ctx.qualname(current.func) in _ELEMENTWISE:
                current = current.args[0].value
            elif type(current) is cst.Call and type(current.func) is cst.Attribute:
                current = current.func.value  # `x.abs()`, `x.flatten()[:n]`, `(x == 0).all()`
            elif type(current) is cst.Comparison:
                current = current.left
            elif type(current) is cst.UnaryOperation:
                current = current.expression
            elif type(current) is cst.BinaryOperation:
                return self._root(current.left) or self._root(current.right)
            else:
                return None
        return None

    def _value_read(self, expr: cst.BaseExpression) -> Optional[tuple[str, str]]:
        """(input name, how) when `expr` contains a value read of a parameter-derived tensor."""
        for current in subtree(expr):
            if type(current) is cst.Name and current.value in self.scalars[-1]:
                return current.value, f"`{current.value}` holds a value computed from it"
            if type(current) is not cst.Call:
                continue
            func = current.func
            if type(func) is cst.Attribute and func.attr.value in VALUE_METHODS:
                root = self._root(func.value)
                if root is not None:
                    return root, f"`.{func.attr.value}()`"
            elif type(func) in (cst.Name, cst.Attribute) and current.args:
                qual = self.ctx.qualname(func)
                if qual in VALUE_FUNCTIONS:
                    root = self._root(current.args[0].value)
                    if root is not None:
                        return root, f"`{qual}(...)`"
        return None

    # conditions ---------------------------------------------------------------------------
    def visit_If(self, node: cst.If) -> None:
        if not self.derived:
            return
        found = self._value_read(node.test)
        if found is None or _only_raises(node.body):
            return
        params = self.derived[-1] - self.outputs[-1]
        orelse = node.orelse.body if (type(node.orelse) is cst.Else) else None
        shortcut = _shortcut_in(self.ctx, node.body, params) or (
            _shortcut_in(self.ctx, orelse, params) if orelse is not None else None)
        self.hits.append((self.ctx.function_key, node.test, found[0], found[1], shortcut))

    def visit_IfExp(self, node: cst.IfExp) -> None:
        if not self.derived:
            return
        found = self._value_read(node.test)
        if found is not None:
            params = self.derived[-1] - self.outputs[-1]
            shortcut = _shortcut_expr(self.ctx, node.body, params) or _shortcut_expr(self.ctx, node.orelse, params)
            self.hits.append((self.ctx.function_key, node.test, found[0], found[1], shortcut))

    def finish(self) -> None:
        for key, node, name, how, shortcut in self.hits:
            if self.ctx.is_init_only(key):
                continue
            note = self.shortcut_note.format(what=shortcut) if shortcut else ""
            self.report(node, self.message.format(name=name, how=how, shortcut=note),
                        evidence={"input": name, "read": how, "shortcut": shortcut},
                        confidence=Confidence.LIKELY if shortcut else None)

    # C++ ----------------------------------------------------------------------------------
    def check_cpp(self, source: CppSource) -> None:
        if "item" not in idents(source):
            return
        tokens = source.tokens
        for i, tok in enumerate(tokens):
            if tok.text != "if" or i + 1 >= len(tokens) or tokens[i + 1].text != "(":
                continue
            args, close = call_args(tokens, i)
            cond = [t for arg in args for t in arg]
            texts = [t.text for t in cond]
            if "item" in texts and _CPP_REDUCTIONS & set(texts):
                # name the tensor the `.item()` chain starts from (`x` in `x.abs().max().item<float>()`)
                item = next(k for k in range(i + 2, close) if tokens[k].text == "item")
                root = chain_root(tokens, item)
                if root is None:  # `torch::abs(x).max().item<float>()`: the parameter read inside
                    params = {p for fn in source.functions if fn.body_start < i < fn.body_end for p in fn.params}
                    root = next((tokens[k].text for k in range(i + 2, item) if tokens[k].text in params), None)
                name = root if root is not None else "tensor"
                self.report_cpp(source, tok.offset, self.message.format(
                    name=name, how="a reduction read back with `.item()`", shortcut=""),
                    evidence={"input": root, "read": "item"})


def _only_raises(body: cst.BaseSuite) -> bool:
    stmts = body.body if (type(body) is cst.IndentedBlock) else [body]
    smalls = []
    for stmt in stmts:
        if type(stmt) not in (cst.SimpleStatementLine, cst.SimpleStatementSuite):
            return False
        smalls.extend(stmt.body)
    return bool(smalls) and all(type(s) in (cst.Raise, cst.Assert) or (
        type(s) is cst.Expr and type(s.value) is cst.Call and type(s.value.func) is cst.Attribute
        and s.value.func.attr.value == "warn") for s in smalls)


def _shortcut_in(ctx, body: Optional[cst.BaseSuite], params: set[str]) -> Optional[str]:
    """What the branch returns when its first return skips the work (input, zeros, a constant)."""
    if body is None:
        return None
    stmts = body.body if (type(body) is cst.IndentedBlock) else [body]
    for stmt in stmts[:3]:
        if type(stmt) in (cst.SimpleStatementLine, cst.SimpleStatementSuite):
            for small in stmt.body:
                if type(small) is cst.Return and small.value is not None:
                    return _shortcut_expr(ctx, small.value, params)
    return None


def _shortcut_expr(ctx, expr: cst.BaseExpression, params: set[str]) -> Optional[str]:
    if type(expr) is cst.Name and expr.value in params:
        return f"the input `{expr.value}` itself"
    if type(expr) in (cst.Integer, cst.Float):
        return f"the constant {expr.value}"
    if type(expr) is cst.Call:
        qual = ctx.qualname(expr.func)
        if qual in _SHORTCUTS:
            return f"`{qual}(...)`"
        if type(expr.func) is cst.Attribute and expr.func.attr.value in _SHORTCUT_METHODS \
                and type(expr.func.value) is cst.Name and expr.func.value.value in params:
            return f"`{expr.func.value.value}.{expr.func.attr.value}()`"
    if type(expr) is cst.BinaryOperation and type(expr.operator) is cst.Multiply and any(
            type(side) in (cst.Integer, cst.Float) and side.value in ("0", "0.0", "0.") for side in (expr.left, expr.right)):
        return "the input times zero"
    return None
