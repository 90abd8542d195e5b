"""Callables Triton runs on every launch, and whether they keep state, for GK114. Not a rule file.

`triton.heuristics({...})` values, `triton.autotune(key=..., prune_configs_by={...},
pre_hook=, post_hook=)`, `triton.Config(pre_hook=)`: each runs when the kernel launches. A
hook is *stateful* when its code (a lambda, a def, or the def a factory call returns) advances
or consumes state that outlives the launch: `next(...)`, a `global` / `nonlocal` write, an
augmented assignment or item / attribute write to something that is not one of its
parameters, a container's `append` / `pop` / `update` on a name that is not a parameter, or a
random or clock read. Functions of the file the hook calls are followed (depth 2).
"""

from __future__ import annotations

from typing import Iterator, Optional

import libcst as cst

from gatekeeper.static.walk import subtree

HOOK_TAKERS = frozenset({"triton.heuristics", "triton.autotune", "triton.Config", "triton.runtime.heuristics",
                         "triton.runtime.autotune", "triton.runtime.Config", "triton.runtime.autotuner.heuristics",
                         "triton.runtime.autotuner.autotune", "triton.runtime.autotuner.Config"})
_HOOK_KEYWORDS = frozenset({"pre_hook", "post_hook", "prune_configs_by", "perf_model", "early_config_prune", "key",
                            "values"})
# methods of a JIT function that register a hook run on every launch
HOOK_METHODS = frozenset({"add_pre_run_hook"})
_MUTATORS = frozenset({"append", "pop", "popleft", "update", "add", "setdefault", "extend", "insert", "send",
                       "__next__", "appendleft", "rotate", "clear", "increment"})
_STATE_READS = ("random.", "time.", "numpy.random.", "itertools.count", "secrets.")


def hook_values(call: cst.Call, resolve_dict) -> Iterator[cst.BaseExpression]:
    """The callables a hook-taking call receives: dict values (heuristics, prune_configs_by)
    and hook keywords; `resolve_dict` maps a Name to the dict display it is bound to."""
    method = type(call.func) is cst.Attribute and call.func.attr.value in HOOK_METHODS
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value not in _HOOK_KEYWORDS:
            continue
        value = arg.value
        if type(value) is cst.Name:
            value = resolve_dict(value) or value
        if type(value) is cst.Dict:
            yield from (e.value for e in value.elements if type(e) is cst.DictElement)
        elif arg.keyword is not None or method:
            yield value


def _params(node: cst.CSTNode) -> set[str]:
    params = node.params if isinstance(node, (cst.Lambda, cst.FunctionDef)) else None
    if params is None:
        return set()
    return {p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)} | \
        {p.name.value for p in (params.star_arg, params.star_kwarg) if isinstance(p, cst.Param)}


def _locals(node: cst.CSTNode) -> set[str]:
    """Names the hook binds itself (assignments, loop targets, comprehension targets)."""
    out: set[str] = set()
    for sub in subtree(node):
        if type(sub) is cst.AssignTarget and type(sub.target) is cst.Name:
            out.add(sub.target.value)
        elif type(sub) in (cst.For, cst.CompFor) and type(sub.target) is cst.Name:
            out.add(sub.target.value)
    return out


def _root(expr: cst.BaseExpression) -> Optional[str]:
    while type(expr) in (cst.Attribute, cst.Subscript):
        expr = expr.value  # type: ignore[union-attr]
    return expr.value if type(expr) is cst.Name else None


def stateful(node: cst.CSTNode, qualname, defs: dict[str, cst.FunctionDef], depth: int = 0) -> Optional[str]:
    """What in a hook's code keeps state across launches (`next(launches)`), or None."""
    # `self` / `cls` outlive the call: `self.n += 1` in a callable object's `__call__` is state
    own = (_params(node) - {"self", "cls"}) | _locals(node)
    params = own
    if isinstance(node, cst.Call):  # a factory's result: each function it defines is a hook
        factory = defs.get(node.func.value) if type(node.func) is cst.Name else None
        if factory is None or depth >= 2:
            return None
        inner = [sub for sub in subtree(factory.body) if type(sub) in (cst.FunctionDef, cst.Lambda)]
        return next((found for sub in inner if (found := stateful(sub, qualname, defs, depth + 1))), None)
    for sub in subtree(node):
        kind = type(sub)
        if kind in (cst.Global, cst.Nonlocal):
            return "a `global`/`nonlocal` write"
        if kind in (cst.AugAssign, cst.Assign, cst.AnnAssign):
            # a bare name is local (a `global`/`nonlocal` is caught above); an item or attribute
            # of something that is neither a parameter nor a local outlives the launch
            targets = [t.target for t in sub.targets] if kind is cst.Assign else [sub.target]
            for target in targets:
                root = _root(target)
                if type(target) in (cst.Attribute, cst.Subscript) and root is not None and root not in own:
                    return f"a write to `{root}`"
        if kind is cst.Call:
            qual = qualname(sub.func) or ""
            if qual == "builtins.next":
                return "`next(...)`"
            if qual.startswith(_STATE_READS):
                return f"`{qual}`"
            func = sub.func
            if type(func) is cst.Attribute and func.attr.value in _MUTATORS and _root(func.value) not in params \
                    and _root(func.value) is not None:
                return f"`{_root(func.value)}.{func.attr.value}(...)`"
            if type(func) is cst.Name and func.value in defs and depth < 2 and defs[func.value] is not node:
                found = stateful(defs[func.value], qualname, defs, depth + 1)
                if found is not None:
                    return found
    return None
