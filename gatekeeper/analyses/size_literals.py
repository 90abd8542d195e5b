"""Which role an integer literal plays in a kernel (a bound, an index offset, a row stride, an
allocation size) and whether that value is one of the problem's sizes: the analysis behind
GK203 for Triton kernels and C++/CUDA sources. Nothing here reports."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from gatekeeper.analyses.cpp_constants import CppConstant, CppFacts
from gatekeeper.analyses.cpp_number_roles import CppRoles
from gatekeeper.static.context import FileContext
from gatekeeper.static.names import int_value
from gatekeeper.static.walk import subtree

ROLES = {
    "bound": "a loop or guard bound", "offset": "an index offset", "stride": "a row stride in an index",
    "alloc": "an allocation size",
}


def is_tile_like(value: int) -> bool:
    return value <= 1024 and value & (value - 1) == 0


def meaning(problem, value: int, role: str, vector: bool) -> Optional[str]:
    """Exact sizes for every size role; offsets built from the sizes only for an offset, and
    sizes counted in vectors only for an offset or a bound in code that uses vector types."""
    why = problem.explain(value)
    if why is not None:
        return why
    if role == "offset":
        derived = problem.explain_offset(value)
        # a count of N-wide vectors means something only in code that loads vectors: in
        # `s[r * 32 + lane]` of scalar code, 32 is the warp width, not BATCH/2
        return None if derived is not None and "vectors" in derived and not vector else derived
    if role == "bound" and vector:
        derived = problem.explain_offset(value)
        return derived if derived is not None and "vectors" in derived else None
    return None


def judge_cpp(problem, facts: CppFacts, roles: CppRoles, index: int, value: int,
              exact_only: bool = False) -> Optional[tuple[str, str, bool]]:
    """(why, role, the function reads its sizes) when the C++ number token at index is one of
    the problem's sizes used as a size. `exact_only` for a constant that is a tile width
    elsewhere: no derived relations."""
    if value < 17:
        return None
    exact = problem.explain(value)
    if exact is None and exact_only:
        return None
    if facts.tile_use(index):
        return None
    role = roles.role(index)
    if role is None or (exact is None and role not in ("offset", "bound")):
        return None  # derived relations (offsets, vector counts) are asked only here
    reads = roles.reads_sizes_at(index)
    if reads and is_tile_like(value) and not (role in ("offset", "stride") and roles.indexes_global(index)):
        return None  # a power-of-two width next to run-time sizes, unless it lays out an input
    why = exact or meaning(problem, value, role, vector=facts.vector_types)
    # an output allocated at literal sizes is likely whatever else the function reads
    return (why, role, reads and role != "alloc") if why is not None else None


def certain_cpp(roles: CppRoles, index: int, value: int, role: str, why: str) -> bool:
    """A C++ literal that can only be the nominal size: a free size (fixed dimensions never
    get here) that is not a power-of-two tile width, not a count of vectors, used as a loop
    or guard bound or as an offset or stride into a pointer argument, in a function that
    learns no size at run time. At any other size that code computes a wrong result or
    goes out of bounds."""
    if roles.reads_sizes_at(index) or is_tile_like(value) or "vectors" in why:
        return False
    return role == "bound" or (role in ("offset", "stride") and roles.indexes_global(index))


def certain_triton(reads: bool, value: int, role: str, why: str) -> bool:
    """The Triton form of certain_cpp: an offset or stride of address arithmetic (the only
    roles triton_role gives besides bounds) in a kernel told no size."""
    return not reads and not is_tile_like(value) and "vectors" not in why and role in ("offset", "stride", "bound")


def launch_setting_parameter(sources, function: str, position: int) -> bool:
    """The `position`-th parameter of the C++ function `function` is only a launch setting:
    every use is the block of a `<<<grid, block>>>`, part of a grid computed from it, inside
    a `dim3` declaration, or a tile width's use (`(n + threads - 1) / threads`). A literal
    handed there is a threads-per-block choice, not a size."""
    for source in sources:
        for fn in source.functions:
            if fn.name != function or position >= len(fn.params):
                continue
            name, toks = fn.params[position], source.tokens
            uses = [i for i in source.by_text["ident"].get(name, ()) if fn.body_start < i < fn.body_end]
            if not uses:
                return False
            facts = CppFacts.of(source)
            geometry: set[int] = set()
            for launch in facts.launches:
                geometry.update(launch.block)
                geometry.update(launch.grid)
            for const in facts.constants.values():
                if const.kind == "dim3":
                    geometry.update(const.body)
            return all(i in geometry or facts.tile_use(i) for i in uses) and all(
                toks[i - 1].text not in (".", "->") for i in uses)
    return False


def local_size_arguments(facts: CppFacts, problem, reported: set[int]) -> list[tuple[CppConstant, str]]:
    """`int n = 768;` handed to a kernel launch as its size (the C++ form of GK206): each
    local constant whose value is one of the problem's sizes, with why; adds the values to
    `reported`. A power of two passed along is a block or tile width as often as a size."""
    arguments = launch_arguments(facts)
    out: list[tuple[CppConstant, str]] = []
    for const in facts.constants.values() if arguments else ():
        if const.kind != "local" or not const.body or not any(i in arguments for i in facts.uses.get(const.name, [])):
            continue  # not handed to a launch: its value is not needed
        value = facts.value_of(const.name, 0)
        why = problem.explain(value) if value is not None and value not in reported else None
        if why is not None and not is_tile_like(value):
            reported.add(value)
            out.append((const, why))
    return out


def launch_arguments(facts: CppFacts) -> set[int]:
    """Token indices of the arguments of every `k<<<grid, block>>>(...)` call."""
    out: set[int] = set()
    toks = facts.tokens
    for launch in facts.launches:
        end = launch.index
        while end < len(toks) and toks[end].text != ">>>":
            end += 1
        if end + 1 < len(toks) and toks[end + 1].text == "(":
            depth = 0
            for k in range(end + 1, len(toks)):
                depth += {"(": 1, ")": -1}.get(toks[k].text, 0)
                if depth == 0:
                    break
                out.add(k)
    return out


def steps_tiles(toks, i: int) -> bool:
    """`t * T + threadIdx.x`: the start of tile t, for a constant that is a tile elsewhere."""
    return (i > 0 and toks[i - 1].text == "*" and i + 2 < len(toks) and toks[i + 1].text == "+"
            and toks[i + 2].text in ("threadIdx", "tid", "tx", "ty", "lane"))


def _mentions_program_id(expr: cst.BaseExpression) -> bool:
    for sub in subtree(expr):
        if type(sub) is cst.Name and sub.value in ("program_id", "pid") or (
                type(sub) is cst.Attribute and sub.attr.value == "program_id"):
            return True
    return False


def address_names(kernel: cst.FunctionDef) -> set[str]:
    """Names used in a `tl.load`/`tl.store` address or next to a `*_ptr` name."""
    out: set[str] = set()
    for sub in subtree(kernel.body):
        expr = None
        if type(sub) is cst.Call and type(sub.func) is cst.Attribute and sub.args and (
                sub.func.attr.value in ("load", "store") or sub.func.attr.value.startswith("atomic_")):
            expr = sub.args[0].value
        elif type(sub) is cst.BinaryOperation and any(
                type(n) is cst.Name and n.value.endswith("ptr") for n in (sub.left, sub.right)):
            expr = sub
        if expr is not None:
            out.update(n.value for n in subtree(expr) if type(n) is cst.Name)
    return out


def triton_reads_sizes(kernel: cst.FunctionDef) -> bool:
    """A parameter that is not `tl.constexpr` compared against or looped to: the kernel is
    told its sizes."""
    params = {p.name.value for p in kernel.params.params if p.annotation is None or not any(
        type(n) is cst.Name and n.value == "constexpr" or type(n) is cst.Attribute and n.attr.value == "constexpr"
        for n in subtree(p.annotation.annotation))}
    for sub in subtree(kernel.body):
        if type(sub) in (cst.Comparison, cst.Call):
            if type(sub) is cst.Call and not (type(sub.func) is cst.Name and sub.func.value == "range"
                                                  or type(sub.func) is cst.Attribute and sub.func.attr.value in ("range", "static_range")):
                continue
            if any(type(n) is cst.Name and n.value in params for n in subtree(sub)):
                return True
    return False



def cpp_size_read(toks, index: int, before: bool) -> bool:
    """`x.size(1)`, `x.sizes()[1]`, `x.numel()` ending at `index` (before the operator) or
    starting at `index` (after it)."""
    if before:
        if toks[index].text == ")":
            depth, k = 0, index
            while k >= 0:
                depth += {")": 1, "(": -1}.get(toks[k].text, 0)
                if depth == 0:
                    break
                k -= 1
            return k > 0 and toks[k - 1].text in ("size", "numel") and toks[k - 2].text in (".", "->")
        if toks[index].text == "]":
            k = index
            while k >= 0 and toks[k].text != "[":
                k -= 1
            return k > 2 and toks[k - 1].text == ")" and toks[k - 3].text == "sizes"
        return False
    # after the operator: x . size ( 1 )
    return (index + 2 < len(toks) and toks[index + 1].text in (".", "->")
            and toks[index + 2].text in ("size", "numel", "sizes"))

# Triton kernels ---------------------------------------------------------------------------
def triton_role(ctx: FileContext, node: cst.Integer, addressed: set[str]) -> Optional[str]:
    """The role of an integer literal inside a Triton kernel (bound, offset, stride), or None.
    `addressed`: the kernel's names that take part in address arithmetic (address_names)."""
    parent = ctx.parent(node)
    if type(parent) is cst.UnaryOperation:
        node, parent = parent, ctx.parent(parent)
    if type(parent) in (cst.Comparison, cst.ComparisonTarget):
        return "bound"
    if type(parent) is cst.Arg:
        call = ctx.parent(parent)
        if type(call) is cst.Call and (ctx.qualname(call.func) or "").rsplit(".", 1)[-1] in (
                "range", "static_range"):
            return "bound"
        return None
    if type(parent) is cst.BinaryOperation and type(parent.operator) in (cst.FloorDivide, cst.Divide) \
            and _in_range_bound(ctx, parent):
        return "bound"  # range(0, 4096 // BLOCK_K)
    if type(parent) is cst.BinaryOperation:
        other = parent.right if parent.left is node else parent.left
        if is_tile_like(int_value(node) or 0) and _mentions_program_id(other):
            return None  # pid * 256: a tile's start (Triton tiles are powers of two; pid * 48 is a row)
        if not _pointer_arithmetic(ctx, parent, addressed):
            return None  # x * 768 scales a value; only address arithmetic lays out data
        if type(parent.operator) in (cst.Add, cst.Subtract):
            return "offset"
        if type(parent.operator) is cst.Multiply:
            return "stride"
    return None


def _in_range_bound(ctx: FileContext, expr: cst.BaseExpression) -> bool:
    top = expr
    while type(ctx.parent(top)) is cst.BinaryOperation:
        top = ctx.parent(top)
    arg = ctx.parent(top)
    call = ctx.parent(arg) if (type(arg) is cst.Arg) else None
    return type(call) is cst.Call and (ctx.qualname(call.func) or "").rsplit(".", 1)[-1] in (
        "range", "static_range")


def _pointer_arithmetic(ctx: FileContext, expr: cst.BaseExpression, addressed: set[str]) -> bool:
    """The arithmetic around expr computes an address: it reaches a `tl.load`/`tl.store`
    (or atomic) argument, involves a `*_ptr` name, or is assigned to a name that does."""
    top = expr
    while type(ctx.parent(top)) in (cst.BinaryOperation, cst.UnaryOperation):
        top = ctx.parent(top)
    if any(type(n) is cst.Name and n.value.endswith("ptr") for n in subtree(top)):
        return True
    arg = ctx.parent(top)
    if type(arg) is cst.Assign and len(arg.targets) == 1 and type(arg.targets[0].target) is cst.Name:
        return arg.targets[0].target.value in addressed  # offs = row * 768 + ...
    call = ctx.parent(arg) if (type(arg) is cst.Arg) else None
    return type(call) is cst.Call and type(call.func) is cst.Attribute and bool(call.args) \
        and call.args[0] is arg and (  # the address, not the value stored
            call.func.attr.value in ("load", "store") or call.func.attr.value.startswith("atomic_"))
