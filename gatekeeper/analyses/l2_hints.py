"""Which `evict_last` cache hints sit on loads that the launch never reads again. Not a
rule file: GK418 reports them, GK416 leaves them to GK418 (its own hint warning would
repeat the line).

`evict_last` asks L2 to keep a line longer than its neighbours. Inside one launch that
pays only when the line is read again: a tile re-read in a loop, a second pass over a row,
a weight vector every program loads, an operand tile a GEMM shares across programs. A load
that is *single use* gets nothing from the hint in the launch that issues it; its only
effect is on the next call, which finds the line still resident after the harness's L2
flush. A load is single use when all of these hold:

- Triton: the kernel has no `tl.dot` (contractions share operand tiles across programs),
  the load is in no loop, the pointer's base argument is loaded at no other place of the
  kernel, its offsets depend on `tl.program_id` (each program reads its own part; a load
  without it is shared by every program) and the program id is neither divided nor taken
  modulo (grouped orderings make programs share tiles).
- a persisting access-policy window over a tensor's `data_ptr` (GK416 reports it, certain);
- CUDA / PTX: the `asm` load with `L2::evict_last` is in a `__global__` kernel (or a
  `__device__` helper that only such kernels call) whose body has no loop and no
  `__shared__` memory, and whose index is built from `blockIdx` / `threadIdx`.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from gatekeeper.static.walk import children as node_children

from gatekeeper.analyses.harness_support import literal
from gatekeeper.analyses.stream_support import asm_strings, ptx_words
from gatekeeper.static.context import FileContext
from gatekeeper.static.cpp_functions import CppFunction
from gatekeeper.static.cpp_sources import CppSource

_CACHE = "_gk418_single_use"
_LOOPS = (cst.For, cst.While)
_LOAD = "triton.language.load"
_PID = "triton.language.program_id"
_SHARING = frozenset({"triton.language.dot", "triton.language.dot_scaled"})


def evict_last(ctx: FileContext, call: cst.Call) -> bool:
    """`eviction_policy="evict_last"`, also through a module constant (`KEEP = "evict_last"`)."""
    return any(a.keyword is not None and a.keyword.value == "eviction_policy"
               and literal(ctx, a.value) == "evict_last" for a in call.args)


def single_use_load(ctx: FileContext, call: cst.Call) -> Optional[str]:
    """The kernel argument a Triton `tl.load(..., eviction_policy="evict_last")` reads once
    in the whole launch, or None. Call it while the traversal is inside the kernel."""
    kernel = enclosing_triton_kernel(ctx)
    if kernel is None:
        return None
    cache: dict[int, tuple[cst.FunctionDef, dict[int, str]]] = ctx.__dict__.setdefault(_CACHE, {})
    hit = cache.get(id(kernel))
    if hit is None or hit[0] is not kernel:
        hit = cache[id(kernel)] = (kernel, _analyse(ctx, kernel))
    return hit[1].get(id(call))


def enclosing_triton_kernel(ctx: FileContext) -> Optional[cst.FunctionDef]:
    """The innermost `@triton.jit` (or autotuned) function the traversal is inside, if any."""
    return next((f for f in reversed(ctx.functions) if is_triton_kernel(ctx, f)), None)


def is_triton_kernel(ctx: FileContext, function: cst.FunctionDef) -> bool:
    """Decorated with `triton.jit` (or `triton.autotune` / `triton.heuristics`)."""
    for decorator in function.decorators:
        expr = decorator.decorator
        qual = ctx.qualname(expr.func if type(expr) is cst.Call else expr) or ""
        if qual.startswith("triton.jit") or qual in ("triton.autotune", "triton.heuristics"):
            return True
    return False


def _analyse(ctx: FileContext, kernel: cst.FunctionDef) -> dict[int, str]:
    params = {p.name.value for p in (*kernel.params.posonly_params, *kernel.params.params)}
    assigned: dict[str, list[cst.BaseExpression]] = {}
    loads: list[tuple[cst.Call, bool]] = []  # (load, inside a loop)
    pid_names: set[str] = set()
    shares = False
    stack: list[tuple[cst.CSTNode, bool]] = [(kernel.body, False)]
    while stack:
        node, looped = stack.pop()
        kind = type(node)
        if kind is cst.FunctionDef:
            continue
        if kind is cst.Assign:
            for target in node.targets:
                if type(target.target) is cst.Name:
                    assigned.setdefault(target.target.value, []).append(node.value)
                    if _calls(ctx, node.value, _PID):
                        pid_names.add(target.target.value)
        elif kind is cst.Call:
            qual = ctx.qualname(node.func)
            if qual == _LOAD and node.args:
                loads.append((node, looped))
            elif qual in _SHARING:
                shares = True
        inner = looped or kind in _LOOPS
        stack.extend((child, inner) for child in node_children(node))
    if shares:
        return {}
    # pid-derived names, through locals (`offs = pid * BLOCK + tl.arange(0, BLOCK)`)
    derived = set(pid_names)
    for _ in range(6):
        grew = {n for n, values in assigned.items() if n not in derived
                and any(_mentions(v, derived) for v in values)}
        if not grew:
            break
        derived |= grew
    if any(_divides_pid(v, derived) for values in assigned.values() for v in values):
        return {}
    bases: dict[int, Optional[str]] = {id(call): _base(call.args[0].value, params, assigned) for call, _ in loads}
    count: dict[str, int] = {}
    for base in bases.values():
        if base is not None:
            count[base] = count.get(base, 0) + 1
    out: dict[int, str] = {}
    for call, looped in loads:
        base = bases[id(call)]
        if (base is None or looped or count[base] != 1 or not evict_last(ctx, call)
                or not (_mentions(call.args[0].value, derived) or _calls(ctx, call.args[0].value, _PID))):
            continue
        out[id(call)] = base
    return out


def _names(expr: cst.CSTNode) -> set[str]:
    out: set[str] = set()
    stack = [expr]
    while stack:
        node = stack.pop()
        if type(node) is cst.Name:
            out.add(node.value)
        stack.extend(node_children(node))
    return out


def _mentions(expr: cst.CSTNode, names: set[str]) -> bool:
    return bool(_names(expr) & names)


def _calls(ctx: FileContext, expr: cst.CSTNode, qual: str) -> bool:
    stack = [expr]
    while stack:
        node = stack.pop()
        if type(node) is cst.Call and ctx.qualname(node.func) == qual:
            return True
        stack.extend(node_children(node))
    return False


def _divides_pid(expr: cst.BaseExpression, derived: set[str]) -> bool:
    """`pid // num_n`, `pid % GROUP`: a grouped program order, where programs share tiles."""
    stack: list[cst.CSTNode] = [expr]
    while stack:
        node = stack.pop()
        if type(node) is cst.BinaryOperation and type(node.operator) in (cst.FloorDivide, cst.Modulo) \
                and _mentions(node.left, derived):
            return True
        stack.extend(node_children(node))
    return False


def _base(pointer: cst.BaseExpression, params: set[str], assigned: dict[str, list[cst.BaseExpression]]) -> Optional[str]:
    """The kernel argument a pointer expression starts from (`x_ptr + offs`, a local `ptrs`)."""
    seen: set[str] = set()
    frontier = _names(pointer)
    for _ in range(6):
        hits = frontier & params
        if hits:
            # a pointer argument is named like one; offsets and sizes are not added to pointers alone
            pointers = sorted(h for h in hits if "ptr" in h.lower()) or sorted(hits)
            return pointers[0] if len(pointers) == 1 else None
        seen |= frontier
        nxt: set[str] = set()
        for name in frontier:
            for value in assigned.get(name, ()):
                nxt |= _names(value)
        frontier = nxt - seen
        if not frontier:
            break
    return None


# CUDA / PTX ---------------------------------------------------------------------------------
def single_use_ptx(source: CppSource) -> list[int]:
    """Offsets of inline-PTX `evict_last` hints in loop-free kernels without shared memory."""
    hints = [(offset, text) for offset, text in asm_strings(source) if "evict_last" in ptx_words(text)]
    if not hints:
        return []
    tokens = source.tokens
    funcs = source.functions
    out: list[int] = []
    for offset, _ in hints:
        index = _token_at(source, offset)
        owner = next((f for f in funcs if f.body_start < index < f.body_end), None)
        if owner is None:
            continue
        kernels = [owner] if owner.is_kernel else [f for f in funcs if f.is_kernel and _calls_name(tokens, f, owner.name)]
        if kernels and all(_streaming_kernel(tokens, k) for k in kernels):
            out.append(offset)
    return out


def _token_at(source: CppSource, offset: int) -> int:
    tokens = source.tokens
    lo, hi = 0, len(tokens)
    while lo < hi:
        mid = (lo + hi) // 2
        if tokens[mid].offset < offset:
            lo = mid + 1
        else:
            hi = mid
    return lo


def _calls_name(tokens, function: CppFunction, name: str) -> bool:  # type: ignore[no-untyped-def]
    return any(tokens[i].text == name and tokens[i + 1].text == "(" for i in range(function.body_start, function.body_end - 1))


def _streaming_kernel(tokens, kernel: CppFunction) -> bool:  # type: ignore[no-untyped-def]
    words = {tokens[i].text for i in range(kernel.body_start, kernel.body_end)}
    return not (words & {"for", "while", "do", "__shared__", "__syncthreads"}) and bool(
        words & {"blockIdx", "threadIdx"})


def window_over_tensor(names: frozenset[str]) -> bool:
    """A C++ source that sets an access-policy window (`accessPolicyWindow.base_ptr`) and
    reads a tensor's `data_ptr`: the window is over memory the caller handed in."""
    return "base_ptr" in names and "data_ptr" in names and "accessPolicyWindow" in names
