"""Which torch uses sit on a fallback path: the other branch of an if/else or try/except
whose main branch launches the submission's own kernel.

Not a rule file: it defines no rule with a `code`. Covered shapes:

    try: return ext.f(x)            if x.is_cuda: return ext.f(x)     if ok: y = k[grid](x)
    except Exception:               return x.mean(0)                  else:  y = x.mean(0)
        return x.mean(0)

The branch with torch compute is the fallback when a sibling branch of the same statement
calls an own kernel, or, for an `if`/`try` without `else` whose body returns, when the
kernel and the torch code sit on the two sides of that early return.
"""

from __future__ import annotations

from typing import Iterable, Optional

import libcst as cst

from gatekeeper.static.walk import walk

from gatekeeper.analyses.call_sites import call_sites, name_references

from gatekeeper.analyses.torch_usage_model import Fallback, Kernel, UsageFacts, Use, path_to_function

__all__ = ["Fallback", "condition_of", "find_fallbacks"]  # Fallback is defined with the model

_INPUT_MARKERS = frozenset({
    "shape", "size", "numel", "dim", "ndim", "ndimension", "nelement", "stride", "dtype",
    "is_contiguous", "len", "data_ptr", "element_size", "storage_offset",
})
_DEVICE_MARKERS = frozenset({"is_cuda", "device", "is_available", "is_cpu", "device_count", "is_xpu", "is_mps"})


def _slot(child: cst.CSTNode, parent: cst.CSTNode) -> Optional[str]:
    if type(parent) in (cst.If, cst.IfExp):
        if child is parent.body:
            return "body"
        if child is parent.orelse:
            return "orelse"
        return None  # the test
    if type(parent) is cst.Try:
        if child is parent.body:
            return "body"
        if any(child is h for h in parent.handlers):
            return "handler"
    return None


def _slots(path: Iterable[cst.CSTNode]) -> list[tuple[cst.CSTNode, str]]:
    """(statement, slot) for each if/try the node sits in, innermost first."""
    out = []
    items = list(path)
    for child, parent in zip(items, items[1:]):
        slot = _slot(child, parent)
        if slot is not None:
            out.append((parent, slot))
    return out


def _returns(block: cst.BaseSuite) -> bool:
    body = getattr(block, "body", ())
    if not body:
        return False
    last = body[-1]
    if type(last) is cst.SimpleStatementLine:
        return any(type(s) in (cst.Return, cst.Raise) for s in last.body)
    return False


def _words(expr: cst.CSTNode) -> tuple[set[str], list[cst.Call]]:
    """The names and attribute names an expression reads, and the calls in it."""
    words: set[str] = set()
    calls: list[cst.Call] = []
    for entering, sub in walk(expr):
        if not entering:
            continue
        if type(sub) is cst.Name:
            words.add(sub.value)
        elif type(sub) is cst.Attribute:
            words.add(sub.attr.value)
        elif type(sub) is cst.Call:
            calls.append(sub)
    return words, calls


def _predicate_words(usage: UsageFacts, node: cst.CSTNode, words: set[str], calls: list[cst.Call]) -> set[str]:
    """What a test reads through one step of indirection: a local it names (`ok = x.is_cuda and
    x.dtype == torch.bfloat16`; `if not ok:`) and a predicate it calls (`self._kernel_ok(q)`):
    such a test is as much about the inputs as one written inline (round 9's honest code)."""
    ctx = usage.ctx
    fn = node
    while fn is not None and type(fn) is not cst.FunctionDef:
        fn = ctx.parent(fn)
    more: set[str] = set()
    if fn is not None:
        for entering, sub in walk(fn.body):
            if entering and type(sub) is cst.Assign and any(
                    type(t.target) is cst.Name and t.target.value in words for t in sub.targets):
                more |= _words(sub.value)[0]
    called = {c.func.attr.value if type(c.func) is cst.Attribute else c.func.value
              for c in calls if type(c.func) in (cst.Attribute, cst.Name)}
    if called:
        for entering, sub in walk(ctx.module):
            if entering and type(sub) is cst.FunctionDef and sub.name.value in called:
                more |= _words(sub.body)[0]
    return more


def condition_of(node: cst.CSTNode, usage: Optional[UsageFacts] = None) -> str:
    if type(node) is cst.Try:
        return "exception"
    test = getattr(node, "test", None)
    if test is None:
        return "flag"
    words, calls = _words(test)
    if usage is not None and not words & (_INPUT_MARKERS | _DEVICE_MARKERS):
        words |= _predicate_words(usage, node, words, calls)
    if words & _INPUT_MARKERS:
        return "input"
    if words & _DEVICE_MARKERS:
        return "device"
    return "flag"


def _following(usage: UsageFacts, stmt: cst.CSTNode) -> set[int]:
    """Statements that run after `stmt` when it does not return: the rest of its block, or,
    at the end of a block, what follows the enclosing if/try/with (`if ok: try: return
    k(x) except: log()` then `return torch...`)."""
    node = stmt
    for _ in range(8):
        block = usage.ctx.parent(node)
        body = getattr(block, "body", None)
        if not isinstance(body, (list, tuple)):
            return set()
        for index, item in enumerate(body):
            if item is node:
                rest = body[index + 1 :]
                if rest:
                    return {id(s) for s in rest}
                break
        owner = usage.ctx.parent(block) if block is not None else None
        while owner is not None and type(owner) in (cst.Else, cst.ExceptHandler, cst.Finally):
            owner = usage.ctx.parent(owner)
        if type(owner) not in (cst.If, cst.Try, cst.With):
            return set()
        node = owner
    return set()


def find_fallbacks(usage: UsageFacts) -> None:
    """Mark `use.fallback` on every Python use that sits on a fallback path, directly or in a
    helper function that only such a path calls."""
    uses = [u for u in usage.uses if u.node is not None]
    _mark(usage, uses)
    _through_helpers(usage, uses)


def _mark(usage: UsageFacts, uses: list[Use]) -> None:
    kernels: dict[int, list[tuple[str, Kernel]]] = {}
    for kernel in usage.kernels:
        for stmt, slot in _slots(kernel.path):
            kernels.setdefault(id(stmt), []).append((slot, kernel))
    for use in uses:
        for stmt, slot in _slots(use.path):
            others = [k for s, k in kernels.get(id(stmt), []) if s != slot and not (s == "handler" and slot == "body")]
            if others and (type(stmt) in (cst.If, cst.IfExp) or slot == "handler"):
                if not any(s == slot for s, _ in kernels.get(id(stmt), [])):
                    use.fallback = _make(usage, stmt, others[0], kernel_in_body=slot != "body")
                    break
    _early_returns(usage, uses)


def _through_helpers(usage: UsageFacts, uses: list[Use]) -> None:
    """Torch in a helper that holds no launch and whose every call is on a fallback path is
    fallback code too: `if not fits: return self._reference(x)` before the launch makes
    `_reference`'s ops the fallback's (red team round 8: an fp8 GEMM's guarded reference path,
    whose ops read as torch doing the whole op). A helper also named otherwise than by its
    calls (stored, passed on) keeps its uses as they are."""
    if not usage.kernels:
        return
    launching = {k.function for k in usage.kernels}
    pending: dict[str, list[Use]] = {}
    for use in uses:
        if use.fallback is None and use.function not in launching and use.function != "<module>":
            pending.setdefault(use.function, []).append(use)
    if not pending:
        return
    sites = call_sites(usage.ctx, set(pending))
    if not sites:
        return
    counts = name_references(usage.ctx.module, {key.rsplit(".", 1)[-1] for key in sites})
    for key, members in pending.items():
        calls = sites.get(key)
        if not calls or len(calls) != counts[key.rsplit(".", 1)[-1]] - 1:
            continue
        probes = [Use("function", "", "", False, function=caller, node=call, path=path_to_function(usage.ctx, call))
                  for call, caller in calls]
        _mark(usage, probes)
        if all(p.fallback is not None for p in probes):
            for use in members:
                use.fallback = probes[0].fallback


def _make(usage: UsageFacts, stmt: cst.CSTNode, kernel: Kernel, *, kernel_in_body: bool) -> Fallback:
    condition = condition_of(stmt, usage)
    test = getattr(stmt, "test", None)
    truth = _constant_truth(usage, test, 0) if test is not None else None
    if truth is not None and truth != kernel_in_body:
        condition = "dead"  # the condition is fixed and selects the torch path: the kernel never runs
    return Fallback("try" if (type(stmt) is cst.Try) else "if", stmt, condition, kernel.what)


def _constant_truth(usage: UsageFacts, expr: cst.BaseExpression, depth: int) -> Optional[bool]:
    """The truth of a condition fixed when the file is written: literals, `not`, `and`/`or`,
    comparisons, module constants assigned once (`USE_KERNEL = False`), and environment
    variables read with their default (`os.environ.get("USE_KERNEL", "0") == "1"`): the
    harness does not set the submission's own variables, so the default is what runs."""
    value = _static_value(usage, expr, depth)
    return None if value is _UNKNOWN else bool(value)


_UNKNOWN = object()
_ENV_GETTERS = frozenset({"os.environ.get", "os.getenv", "os.environ.setdefault"})
_CASTS = {"builtins.int": int, "builtins.bool": bool, "builtins.str": str, "builtins.float": float}
_STR_METHODS = frozenset({"lower", "upper", "strip", "casefold"})


def _static_value(usage: UsageFacts, expr: cst.BaseExpression, depth: int, names: bool = True) -> object:
    """The value of an expression fixed in the file, or _UNKNOWN. `names=False` inside a
    `self.X = ...` value: a bare name there is usually a parameter (`self.dim = dim`), not
    the module constant of the same name."""
    if depth > 8:
        return _UNKNOWN
    if type(expr) is cst.Name:
        if expr.value in ("True", "False", "None"):
            return {"True": True, "False": False, "None": None}[expr.value]
        values = usage.ctx.constants.get(expr.value, []) if names else []
        if len(values) != 1 or _bindings(usage).get(expr.value, 0) != 1:
            return _UNKNOWN  # rebound somewhere (`X = None` then `try: X = load(...)`): not fixed
        return _static_value(usage, values[0], depth + 1, names)
    if type(expr) is cst.Attribute and type(expr.value) is cst.Name and expr.value.value == "self":
        values = _self_assignments(usage).get(expr.attr.value, [])
        return _static_value(usage, values[0], depth + 1, False) if len(values) == 1 else _UNKNOWN
    if type(expr) in (cst.Integer, cst.Float):
        try:
            return int(expr.value.replace("_", ""), 0) if (type(expr) is cst.Integer) else float(expr.value)
        except ValueError:
            return _UNKNOWN
    if type(expr) is cst.SimpleString:
        return expr.evaluated_value
    if type(expr) in (cst.Tuple, cst.List, cst.Set):
        items = [_static_value(usage, e.value, depth + 1, names) for e in expr.elements]
        return _UNKNOWN if any(i is _UNKNOWN for i in items) else tuple(items)
    if type(expr) is cst.UnaryOperation and type(expr.operator) is cst.Not:
        inner = _static_value(usage, expr.expression, depth + 1, names)
        return _UNKNOWN if inner is _UNKNOWN else not inner
    if type(expr) is cst.BooleanOperation:
        left = _static_value(usage, expr.left, depth + 1, names)
        right = _static_value(usage, expr.right, depth + 1, names)
        if type(expr.operator) is cst.And:
            if (left is not _UNKNOWN and not left) or (right is not _UNKNOWN and not right):
                return False
            return _UNKNOWN if _UNKNOWN in (left, right) else True
        if (left is not _UNKNOWN and left) or (right is not _UNKNOWN and right):
            return True
        return _UNKNOWN if _UNKNOWN in (left, right) else False
    if type(expr) is cst.Comparison and len(expr.comparisons) == 1:
        return _compare(usage, expr, depth, names)
    if type(expr) is cst.Call:
        return _call_value(usage, expr, depth, names)
    return _UNKNOWN


def _bindings(usage: UsageFacts) -> dict[str, int]:
    """How many times each name is bound anywhere in the file (module level, in try/if
    blocks, through `global` in functions, as a loop target)."""
    found = usage.ctx.__dict__.get("_gk3_bindings")
    if found is None:
        found = {}
        for entering, node in walk(usage.ctx.module):
            if not entering:
                continue
            targets: list[cst.CSTNode] = []
            if type(node) is cst.Assign:
                targets = [t.target for t in node.targets]
            elif type(node) in (cst.AnnAssign, cst.AugAssign, cst.For):
                targets = [node.target]
            elif type(node) is cst.Global:
                targets = [n.name for n in node.names]
            for target in targets:
                for sub_entering, sub in walk(target):
                    if sub_entering and type(sub) is cst.Name:
                        found[sub.value] = found.get(sub.value, 0) + 1
        usage.ctx.__dict__["_gk3_bindings"] = found
    return found


def _self_assignments(usage: UsageFacts) -> dict[str, list[cst.BaseExpression]]:
    """`self.X = value` anywhere in the file (every value, so that a flag flipped at run
    time, `self.use_kernel = False` in an except, has two and is not fixed)."""
    found = usage.ctx.__dict__.get("_gk3_self_assignments")
    if found is None:
        found = {}
        for entering, node in walk(usage.ctx.module):
            if entering and type(node) in (cst.Assign, cst.AnnAssign, cst.AugAssign):
                targets = [t.target for t in node.targets] if (type(node) is cst.Assign) else [node.target]
                for target in targets:
                    if type(target) is cst.Attribute and type(target.value) is cst.Name \
                            and target.value.value == "self":
                        values = found.setdefault(target.attr.value, [])
                        if type(node) is cst.AugAssign or node.value is None:
                            values += [cst.Name("None"), cst.Name("None")]  # changed in place: not fixed
                        else:
                            values.append(node.value)
        usage.ctx.__dict__["_gk3_self_assignments"] = found
    return found


def _compare(usage: UsageFacts, expr: cst.Comparison, depth: int, names: bool) -> object:
    target = expr.comparisons[0]
    op = target.operator
    if type(op) in (cst.In, cst.NotIn) and usage.ctx.qualname(target.comparator) == "os.environ":
        return type(op) is cst.NotIn  # "USE_X" in os.environ: unset under the harness
    left = _static_value(usage, expr.left, depth + 1, names)
    right = _static_value(usage, target.comparator, depth + 1, names)
    if _UNKNOWN in (left, right):
        return _UNKNOWN
    try:
        if type(op) is cst.Equal:
            return left == right
        if type(op) is cst.NotEqual:
            return left != right
        if type(op) is cst.In:
            return left in right  # type: ignore[operator]
        if type(op) is cst.NotIn:
            return left not in right  # type: ignore[operator]
        if type(op) in (cst.Is, cst.IsNot) and None in (left, right):
            return (left is right) == (type(op) is cst.Is)
    except TypeError:
        return _UNKNOWN
    return _UNKNOWN


def _call_value(usage: UsageFacts, call: cst.Call, depth: int, names: bool) -> object:
    qual = usage.ctx.qualname(call.func) or ""
    args = [a.value for a in call.args if a.keyword is None]
    if qual in _ENV_GETTERS:
        return _static_value(usage, args[1], depth + 1, names) if len(args) > 1 else None
    if qual in _CASTS and len(args) == 1:
        value = _static_value(usage, args[0], depth + 1, names)
        if value is _UNKNOWN:
            return _UNKNOWN
        try:
            cast = _CASTS[qual]
            return cast(float(value)) if cast is int and isinstance(value, str) else cast(value)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            return _UNKNOWN
    if type(call.func) is cst.Attribute and call.func.attr.value in _STR_METHODS and not args:
        value = _static_value(usage, call.func.value, depth + 1, names)
        return getattr(value, call.func.attr.value)() if isinstance(value, str) else _UNKNOWN
    return _UNKNOWN


def _early_returns(usage: UsageFacts, uses: list[Use]) -> None:
    """`if/try` without else whose body returns: the code after it is the other branch."""
    candidates: dict[int, cst.CSTNode] = {}
    for item in [*usage.kernels, *uses]:
        for stmt, slot in _slots(item.path):
            if slot == "body" and type(stmt) in (cst.If, cst.Try) and _returns(stmt.body):
                if type(stmt) is cst.If and stmt.orelse is not None:
                    continue
                candidates[id(stmt)] = stmt
    for stmt in candidates.values():
        after = _following(usage, stmt)
        if not after:
            continue
        inside_k = [k for k in usage.kernels if any(p is stmt.body for p in k.path)]
        after_k = [k for k in usage.kernels if any(id(p) in after for p in k.path)]
        for use in uses:
            if use.fallback is not None:
                continue
            in_body = any(p is stmt.body for p in use.path)
            is_after = any(id(p) in after for p in use.path)
            if is_after and inside_k and not after_k:
                use.fallback = _make(usage, stmt, inside_k[0], kernel_in_body=True)
            elif in_body and type(stmt) is cst.If and not inside_k:
                # `if not ok: return torch(x)` before the launch, or `if bad(result): return
                # torch(x)` after it: either way one return path is torch's instead of the kernel's
                same = after_k or [k for k in usage.kernels if k.function == use.function]
                if same:
                    use.fallback = _make(usage, stmt, same[0], kernel_in_body=False)
