"""Does the submission's own code only do elementwise or layout work? Not a rule file; GK309.

Answers for the kernels the file itself defines: Triton kernels (functions under a
`triton.jit`-style decorator) and the C++/CUDA sources the file compiles. A kernel does
*more* than elementwise work when it contracts or reduces:

- Triton: `tl.dot`, `tl.sum` / `tl.max` / `tl.min` / `tl.argmax` / `tl.reduce` /
  `tl.cumsum` / `tl.associative_scan` / atomics, or a loop that accumulates
  (`acc += ...`, `acc = acc + ...`, `m = tl.maximum(m, ...)`);
- C++/CUDA: `__shared__` memory, warp shuffles, atomics, tensor-core or library calls
  (`mma`, `wmma`, `cublas`, `cub::Block*` / `cub::Warp*`), `__syncthreads`, or a loop body that accumulates
  (`+=`, `-=`, `*=`, `fma`, `max` / `min` into a variable).

The answer is None (unknown) when the file has own launches but no source to read (a
prebuilt module, a side file that is not there): the caller must not conclude.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from gatekeeper.static.walk import children as node_children

from gatekeeper.static.context import FileContext
from gatekeeper.static.cpp_sources import CppSource

_TL_REDUCE = frozenset(f"triton.language.{n}" for n in (
    "dot", "dot_scaled", "sum", "max", "min", "argmax", "argmin", "reduce", "cumsum", "cumprod",
    "associative_scan", "xor_sum", "atomic_add", "atomic_max", "atomic_min", "atomic_cas", "atomic_xchg",
    "atomic_and", "atomic_or", "atomic_xor", "histogram", "sort", "topk",
))
_ACCUMULATING = frozenset({"maximum", "minimum", "fma", "where"})
_CPP_COOPERATIVE = frozenset({
    "__shared__", "__syncthreads", "__syncwarp", "__shfl_sync", "__shfl_down_sync", "__shfl_xor_sync",
    "__shfl_up_sync", "__reduce_add_sync", "atomicAdd", "atomicMax", "atomicMin", "atomicCAS", "atomicExch",
    "mma", "wmma", "mma_sync", "load_matrix_sync", "cub", "cublasSgemm", "cublasGemmEx", "cutlass", "cute",
})
_CPP_ACCUMULATE = frozenset({"+=", "-=", "*=", "/=", "|=", "&=", "^="})
_CPP_ACC_CALLS = frozenset({"fma", "fmaf", "__fmaf_rn", "max", "min", "fmaxf", "fminf", "fmax", "fmin",
                            "std::max", "std::min"})


def triton_kernels(ctx: FileContext) -> list[cst.FunctionDef]:
    out = []
    for stmt in ctx.module.body:
        if type(stmt) is cst.FunctionDef and any(_triton_decorator(ctx, d) for d in stmt.decorators):
            out.append(stmt)
    return out


def _triton_decorator(ctx: FileContext, decorator: cst.Decorator) -> bool:
    expr = decorator.decorator
    qual = ctx.qualname(expr.func if type(expr) is cst.Call else expr) or ""
    return qual.startswith(("triton.jit", "triton.autotune", "triton.heuristics"))


def triton_reduces(ctx: FileContext, kernel: cst.FunctionDef) -> Optional[str]:
    """What makes a Triton kernel more than elementwise, or None."""
    stack: list[tuple[cst.CSTNode, bool]] = [(kernel.body, False)]
    while stack:
        node, looped = stack.pop()
        kind = type(node)
        if kind is cst.Call:
            qual = ctx.qualname(node.func) or ""
            if qual in _TL_REDUCE:
                return f"`{qual.replace('triton.language.', 'tl.')}`"
            if type(node.func) is cst.Attribute and node.func.attr.value in ("sum", "max", "min", "reduce", "cumsum"):
                return f"`.{node.func.attr.value}()`"
        elif looped and kind is cst.AugAssign:
            return "an accumulating loop"
        elif looped and kind is cst.Assign and _self_update(node):
            return "an accumulating loop"
        inner = looped or kind in (cst.For, cst.While)
        stack.extend((child, inner) for child in node_children(node))
    return None


def _self_update(node: cst.Assign) -> bool:
    """`acc = acc + x`, `m = tl.maximum(m, x)`: a loop-carried accumulator."""
    names = {t.target.value for t in node.targets if type(t.target) is cst.Name}
    if not names:
        return False
    stack: list[cst.CSTNode] = [node.value]
    while stack:
        current = stack.pop()
        if type(current) is cst.Name and current.value in names:
            return True
        stack.extend(node_children(current))
    return False


def cpp_reduces(source: CppSource) -> Optional[str]:
    """What makes a C++/CUDA source more than elementwise, or None."""
    tokens = source.tokens
    for index, tok in enumerate(tokens):
        text = tok.text
        if text in _CPP_COOPERATIVE and (text != "cub" or _cub_collective(tokens, index)):
            return f"`{text}`"
        if text in ("for", "while") and index + 1 < len(tokens) and tokens[index + 1].text == "(":
            found = _loop_accumulates(tokens, index)
            if found:
                return found
    return None


def _cub_collective(tokens, index: int) -> bool:  # type: ignore[no-untyped-def]
    """`cub::BlockReduce`, `cub::WarpScan`, `using namespace cub;`: CUB compiled into the own
    kernel. Not `cub::DeviceReduce::Sum` (the library's own kernels, GK307) or an include path."""
    if index > 0 and tokens[index - 1].text == "namespace":
        return True
    return index + 2 < len(tokens) and tokens[index + 1].text == "::" and not tokens[index + 2].text.startswith("Device")


def _loop_accumulates(tokens, index: int) -> Optional[str]:  # type: ignore[no-untyped-def]
    """The loop starting at tokens[index] (`for (...) body`) accumulates in its body."""
    depth, j = 0, index + 1
    while j < len(tokens):  # skip the header: the counter's `i += stride` is not an accumulator
        if tokens[j].text == "(":
            depth += 1
        elif tokens[j].text == ")":
            depth -= 1
            if depth == 0:
                break
        j += 1
    start = j + 1
    if start >= len(tokens):
        return None
    if tokens[start].text == "{":
        depth, end = 0, start
        while end < len(tokens):
            if tokens[end].text == "{":
                depth += 1
            elif tokens[end].text == "}":
                depth -= 1
                if depth == 0:
                    break
            end += 1
    else:
        end = start
        while end < len(tokens) and tokens[end].text != ";":
            end += 1
    for k in range(start, min(end, len(tokens))):
        text = tokens[k].text
        if text in _CPP_ACCUMULATE or text in ("++", "--") and k > start and tokens[k - 1].kind == "ident" \
                and _declared_outside(tokens, tokens[k - 1].text, index):
            return "an accumulating loop"
        if text in _CPP_ACC_CALLS and k + 1 < len(tokens) and tokens[k + 1].text == "(":
            return "an accumulating loop"
    return None


def _declared_outside(tokens, name: str, loop: int) -> bool:  # type: ignore[no-untyped-def]
    return any(tokens[k].text == name for k in range(max(0, loop - 400), loop))


def own_code_elementwise(ctx: FileContext, sources: list[CppSource]) -> tuple[Optional[bool], str]:
    """(True, "") when every kernel the file defines is elementwise, (False, why) when one
    contracts or reduces, (None, "") when the file defines no kernel source to read."""
    kernels = triton_kernels(ctx)
    for kernel in kernels:
        why = triton_reduces(ctx, kernel)
        if why:
            return False, f"`{kernel.name.value}` uses {why}"
    code = [s for s in sources if "{" in s.text]
    for source in code:
        why = cpp_reduces(source)
        if why:
            return False, f"the C++/CUDA source uses {why}"
    if not kernels and not code:
        return None, ""
    return True, ""


# layout only ---------------------------------------------------------------------------------
_CPP_CASTS = frozenset({"static_cast", "reinterpret_cast", "__ldg", "float", "double", "half", "int",
                        "__float2half", "__half2float", "__float2bfloat16", "__bfloat162float", "__ldcs", "__ldcg"})


def triton_layout_only(ctx: FileContext, kernel: cst.FunctionDef) -> bool:
    """The kernel only moves values: what it stores is a loaded value, possibly cast
    (`tl.store(y + offs, tl.load(x + offs).to(tl.float16))`); offsets and masks may compute.
    A name re-bound to a computed value (`x = tl.clamp(x, ...)`) stops holding a moved one."""
    values: set[str] = set()
    stack: list[cst.CSTNode] = [kernel.body]
    stores = 0
    while stack:  # source order: children pushed reversed
        node = stack.pop()
        if type(node) is cst.Assign:
            names = {t.target.value for t in node.targets if type(t.target) is cst.Name}
            if _moves_value(ctx, node.value, values):
                values |= names
            else:
                values -= names
        elif type(node) is cst.AugAssign and type(node.target) is cst.Name:
            values.discard(node.target.value)
        elif type(node) is cst.Call and (ctx.qualname(node.func) or "") == "triton.language.store":
            if len(node.args) < 2 or not _moves_value(ctx, node.args[1].value, values):
                return False
            stores += 1
        stack.extend(reversed(node_children(node)))
    return stores > 0


def _moves_value(ctx: FileContext, expr: cst.BaseExpression, values: set[str]) -> bool:
    """A loaded value (a `tl.load(...)` or a name holding one), possibly cast with `.to()`."""
    current = expr
    for _ in range(6):
        if type(current) is cst.Name:
            return current.value in values
        if type(current) is cst.Call:
            qual = ctx.qualname(current.func) or ""
            if qual == "triton.language.load":
                return True
            if type(current.func) is cst.Attribute and current.func.attr.value == "to":
                current = current.func.value
                continue
            if qual in ("triton.language.reshape", "triton.language.trans", "triton.language.permute",
                        "triton.language.view", "triton.language.cast") and current.args:
                current = current.args[0].value
                continue
        return False
    return False


def cpp_layout_only(source: CppSource) -> bool:
    """Every `__global__` kernel of the source only copies: each store `dst[...] = rhs;` has a
    right-hand side that, outside its index brackets, is one read, possibly cast."""
    tokens = source.tokens
    kernels = [f for f in source.functions if f.is_kernel]
    if not kernels:
        return False
    for kernel in kernels:
        k = kernel.body_start
        stored = False
        while k < kernel.body_end:
            if tokens[k].text == "=" and k > 0 and tokens[k - 1].text == "]":
                stored = True
                end = k + 1
                while end < kernel.body_end and tokens[end].text != ";":
                    end += 1
                if not _plain_read(tokens, k + 1, end):
                    return False
                k = end
            elif tokens[k].text in _CPP_ACCUMULATE and k > 0 and tokens[k - 1].text == "]":
                return False
            k += 1
        if not stored:
            return False
    return True


def _plain_read(tokens, start: int, end: int) -> bool:  # type: ignore[no-untyped-def]
    """`x[i]`, `(float)x[i]`, `__ldg(&x[i])`: one memory read. A local (`v`, computed in an
    earlier statement) is not: the arithmetic may be there."""
    if not any(tokens[k].text == "[" for k in range(start, end)):
        return False
    depth = 0
    for k in range(start, end):
        text = tokens[k].text
        if text == "[":
            depth += 1
        elif text == "]":
            depth -= 1
        elif depth == 0:
            if text in ("(", ")", "<", ">", "*", "&", ",") and _in_cast(tokens, k, start):
                continue
            if tokens[k].kind == "punct" and text not in ("(", ")"):
                return False
            if tokens[k].kind == "ident" and k + 1 < end and tokens[k + 1].text == "(" and text not in _CPP_CASTS:
                return False
            if tokens[k].kind == "number":
                return False
    return True


def _in_cast(tokens, k: int, start: int) -> bool:  # type: ignore[no-untyped-def]
    """Punctuation of a cast: `static_cast<float>(`, `(float)`, `reinterpret_cast<const float*>(`."""
    window = {t.text for t in tokens[max(start, k - 4):k + 2]}
    return bool(window & _CPP_CASTS)


def own_code_layout_only(ctx: FileContext, sources: list[CppSource]) -> bool:
    """Every kernel the file defines only moves or converts data (no arithmetic on values)."""
    kernels = triton_kernels(ctx)
    code = [s for s in sources if "{" in s.text]
    if not kernels and not code:
        return False
    return all(triton_layout_only(ctx, k) for k in kernels) and all(cpp_layout_only(s) for s in code)
