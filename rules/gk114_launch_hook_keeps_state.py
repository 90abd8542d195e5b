from __future__ import annotations

from typing import Optional

import libcst as cst

from gatekeeper.analyses.launch_hooks import HOOK_METHODS, HOOK_TAKERS, hook_values, stateful
from gatekeeper.report import Category, Confidence, Severity
from gatekeeper.static.examples import Invalid, Valid, snippet
from gatekeeper.static.rule import Rule


class LaunchHookKeepsState(Rule):
    """A callable Triton runs on every launch keeps state across launches: a
    `triton.heuristics({...})` value, a `triton.autotune(key=, prune_configs_by=, pre_hook=,
    post_hook=)` callable or a `triton.Config(pre_hook=)` that calls `next(...)` on a counter,
    writes a `global` / `nonlocal`, an item or attribute of something outside it, appends to
    a container, or reads `random` / `time` (in its own code, in a function of the file it
    calls, in the function a factory call returns, or in a callable object's `__call__`,
    where `self.n += 1` is state); `kernel.add_pre_run_hook(hook)` too.

    Why it games the benchmark: a heuristic's value becomes a `constexpr` of the launch, so a
    heuristic that counts launches switches the compiled kernel after N calls, GK104's call
    counter hidden in the launcher (red team round 12: `"STABLE": lambda args: next(counter) <
    32` dropped softmax's max pass after 32 launches, once the checks were over).

    Confidence: certain. A heuristic should be a function of the launch's arguments.

    Not flagged: heuristics that are pure functions of the arguments (`lambda a:
    a["n_cols"] % a["BLOCK"] == 0`), pre-hooks that zero an argument (`nargs["y"].zero_()`),
    and a hook's own locals.
    """

    code = "GK114"
    name = "LaunchHookKeepsState"
    category = Category.CACHED_OUTPUT
    severity = Severity.ERROR
    confidence = Confidence.CERTAIN
    confirmed_by = "GK611"
    summary = "a Triton heuristic or launch hook counts launches (state that switches the kernel after N calls)"
    message = ("`{taker}` runs this callable on every launch, and it keeps state across launches ({what}): its "
               "value can switch the kernel after some calls, so the timed launches need not run the checked kernel.")
    hint = ("Make heuristics and hooks pure functions of the launch arguments (`lambda a: a['n'] % a['BLOCK'] == 0`); "
            "keep no counters, iterators or random draws in them.")
    VALID = [
        Valid(snippet("""
            import triton
            @triton.heuristics({"EVEN": lambda a: a["n_cols"] % a["BLOCK"] == 0,
                                "BLOCK": lambda a: triton.next_power_of_2(a["n_cols"])})
            @triton.jit
            def k(x, n_cols, EVEN: tl.constexpr, BLOCK: tl.constexpr):
                pass
        """)),
        Valid(snippet("""
            import triton
            def _zero(nargs):
                nargs["y"].zero_()
            configs = [triton.Config({"B": 64}, pre_hook=_zero)]
        """)),
    ]
    INVALID = [
        Invalid(snippet("""
            import itertools, triton
            _n = itertools.count()
            @triton.heuristics({"STABLE": lambda args: next(_n) < 32})
            @triton.jit
            def k(x, STABLE: tl.constexpr):
                pass
        """), line=3, message="it keeps state across launches (`next(...)`)"),
        Invalid(snippet("""
            import triton
            _seen = []
            def _prune(configs, nargs, **kw):
                _seen.append(1)
                return configs[:1] if len(_seen) > 8 else configs
            @triton.autotune(configs=[], key=["n"], prune_configs_by={"early_config_prune": _prune})
            @triton.jit
            def k(x, n):
                pass
        """), line=6, message="`_seen.append(...)`"),
    ]

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.defs: dict[str, cst.FunctionDef] = {}
        self.calls: list[tuple[cst.Call, str]] = []
        self.objects: dict[str, cst.FunctionDef] = {}  # class name -> its __call__

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.defs.setdefault(node.name.value, node)

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        # a callable object (`"STABLE": Planner()`): its `__call__` runs on every launch
        for stmt in node.body.body:
            if type(stmt) is cst.FunctionDef and stmt.name.value == "__call__":
                self.objects[node.name.value] = stmt

    def visit_Call(self, node: cst.Call) -> None:
        qual = self.ctx.qualname(node.func)
        if qual in HOOK_TAKERS:
            self.calls.append((node, qual))
        elif type(node.func) is cst.Attribute and node.func.attr.value in HOOK_METHODS and node.args:
            self.calls.append((node, f"JITFunction.{node.func.attr.value}"))

    def _dict_of(self, name: cst.Name) -> Optional[cst.BaseExpression]:
        binding = self.ctx.resolver.lookup(name.value)
        return binding.value if binding is not None and type(binding.value) is cst.Dict else None

    def finish(self) -> None:
        for call, taker in self.calls:
            for value in hook_values(call, self._dict_of):
                hook: Optional[cst.CSTNode] = value
                if type(value) is cst.Name:
                    hook = self.defs.get(value.value)
                elif type(value) is cst.Call and type(value.func) is cst.Name and value.func.value in self.objects:
                    hook = self.objects[value.func.value]
                if hook is None or type(hook) not in (cst.Lambda, cst.FunctionDef, cst.Call):
                    continue
                what = stateful(hook, self.ctx.qualname, self.defs)
                if what is not None:
                    self.report(call, self.message.format(taker=taker, what=what), evidence={"state": what})
                    break
