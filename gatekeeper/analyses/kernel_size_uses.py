"""The problem's sizes a kernel source uses as sizes, as GK203 reports them: a Triton
literal, a named C++ constant (`#define N 768`, `constexpr int kCols = 48;`) judged by its
uses, a loose C++ number; each with its meaning, its role and how sure the verdict is (the
roles and meanings are size_literals.py's). Not a rule file: it defines no rule with a
`code`; nothing here reports."""

from __future__ import annotations

from itertools import chain
from typing import Iterator, Optional

import libcst as cst

from gatekeeper.analyses.cpp_constants import CppConstant, CppFacts
from gatekeeper.analyses.cpp_number_roles import CppRoles, tile_bound
from gatekeeper.analyses.size_literals import (
    ROLES, certain_cpp, certain_triton, is_tile_like, judge_cpp, meaning, steps_tiles, triton_role,
)
from gatekeeper.report import Confidence
from gatekeeper.static.context import FileContext
from gatekeeper.static.cpp_sources import CppSource


def size_confidence(certain: bool, reads: bool) -> Confidence:
    """Certain where only the nominal size can work; suspect where the code also reads sizes
    (the literal may be a tile width); likely otherwise."""
    return Confidence.CERTAIN if certain else Confidence.SUSPECT if reads else Confidence.LIKELY


def is_triton_kernel(ctx: FileContext, node: cst.FunctionDef) -> bool:
    """Decorated with triton.jit / autotune / heuristics."""
    for deco in node.decorators:
        expr = deco.decorator.func if (type(deco.decorator) is cst.Call) else deco.decorator
        if (ctx.qualname(expr) or "").startswith("triton."):
            return True
    return False


def triton_size_use(ctx: FileContext, node: cst.Integer, value: int, reads: bool,
                    addressed: set[str]) -> Optional[tuple[str, str, Confidence]]:
    """(why, role, confidence) when a literal in a Triton kernel is one of the problem's sizes
    used as a size; `reads`: the kernel is given sizes; `addressed`: names in its address
    arithmetic."""
    if reads and is_tile_like(value):
        return None  # a power-of-two width next to sizes the kernel is given: a tile
    role = triton_role(ctx, node, addressed)
    why = meaning(ctx.problem, value, role, vector=False) if role else None
    if why is None:
        return None
    return why, role, size_confidence(certain_triton(reads, value, role, why), reads)


def size_constants(problem, facts: CppFacts, roles: CppRoles,
                   reported: set[int]) -> Iterator[tuple[CppConstant, str, str, Confidence]]:
    """(constant, why, role text, confidence) for each named constant used as one of the
    problem's sizes, one per value; adds the values to `reported`."""
    for const in facts.constants.values():
        if const.kind not in ("macro", "const") or const.value is None or const.value in reported:
            continue
        if warps_per_block(facts, const) or part_of_fixed_dim(problem, facts, const):
            continue
        uses = facts.uses.get(const.name, [])
        # a constant that is a tile width somewhere (`k0 += BK`) bounds loops over its tile
        tile = any(facts.tile_use(i) for i in uses)
        hits = [(i, h) for i in uses if (h := judge_cpp(problem, facts, roles, i, const.value, exact_only=tile))
                and not (tile and h[1] == "bound" and tile_bound(facts.tokens, i))
                and not (tile and steps_tiles(facts.tokens, i))]
        if not hits:
            continue
        reported.add(const.value)
        why, role, _ = hits[0][1]
        certain = not tile and any(certain_cpp(roles, i, const.value, h[1], h[0]) for i, h in hits)
        yield const, why, ROLES[role], size_confidence(certain, all(h[2] for _, h in hits))


def warps_per_block(facts: CppFacts, const: CppConstant) -> bool:
    """`kWarps = kThreads / 32` (or `>> 5`, or `(kThreads + 31) / 32`) where kThreads is the
    block of a launch or a tile width: the warps of a block are launch geometry, whatever
    problem size the quotient happens to equal (round 9: 1024 / 32 = 32 = the nominal BATCH)."""
    texts = [facts.tokens[i].text for i in const.body if facts.tokens[i].text not in ("(", ")")]
    if texts[-2:] not in (["/", "32"], [">>", "5"]) or not texts[:-2]:
        return False
    operand = texts[:-2]
    if len(operand) == 3 and operand[1:] == ["+", "31"]:
        operand = operand[:1]
    base = facts.constants.get(operand[0]) if len(operand) == 1 else None
    return base is not None and any(facts.tile_use(i) for i in facts.uses.get(base.name, []))


def part_of_fixed_dim(problem, facts: CppFacts, const: CppConstant) -> bool:
    """`kHalf = kHeadDim / 2` (or `>> 1`, or `128 / 2`) where the dividend is a dimension every
    declared shape fixes: a part of a fixed dimension (the half a rotation splits, the
    vectors of a fixed width) is fixed by the problem too, whatever free size the quotient
    happens to equal (round 15: 128 / 2 = 64 = KV_HEADS*BATCH)."""
    fixed = problem.fixed_values
    texts = [facts.tokens[i].text for i in const.body if facts.tokens[i].text not in ("(", ")")]
    if not fixed or len(texts) != 3 or texts[1] not in ("/", ">>") or not texts[2].isdigit():
        return False
    base = facts.constants.get(texts[0])
    value = base.value if base is not None else (int(texts[0]) if texts[0].isdigit() else None)
    return value in fixed


def size_numbers(source: CppSource, problem, facts: CppFacts, roles: CppRoles, reported: set[int],
                 handled: set[int]) -> Iterator[tuple[int, int, str, str, Confidence]]:
    """(token index, value, why, role, confidence) for each loose number, in source order,
    that is one of the problem's sizes used as a size, one per value not in `reported`
    (which it extends); numbers in `handled` and in a constant's definition are skipped."""
    tokens = facts.tokens
    in_bodies: set[int] = set(handled)
    for const in facts.constants.values():
        in_bodies.update(const.body)
    for index in sorted(chain.from_iterable(source.by_text["number"].values())):  # the numbers, in order
        value = tokens[index].int_value
        if value is None or value in reported or index in in_bodies or (1024 not in problem.dims and in_kibibytes(tokens, index)):
            continue  # a literal inside a constant's definition is judged by the constant's uses
        hit = judge_cpp(problem, facts, roles, index, value)
        if hit is None:
            continue
        why, role, reads = hit
        reported.add(value)
        yield index, value, why, role, size_confidence(certain_cpp(roles, index, value, role, why), reads)


def in_kibibytes(tokens, index: int) -> bool:
    """`48 * 1024`, `1024 * 48`, `48 << 10` (and MiB: `<< 20`, `* 1024 * 1024`): a memory size
    such as the 48 KiB shared-memory default, not a dimension (red team round 8, s09). The
    caller asks only where 1024 is not itself one of the problem's dimensions."""
    def text(i: int) -> str:
        return tokens[i].text if 0 <= i < len(tokens) else ""
    after, before = (text(index + 1), text(index + 2)), (text(index - 2), text(index - 1))
    return after in (("*", "1024"), ("<<", "10"), ("<<", "20")) or before == ("1024", "*")


def definition_text(source: CppSource, facts: CppFacts, const: CppConstant) -> str:
    """`#define N 768` or `kCols = 48`, as written, in backquotes."""
    first, last = facts.tokens[const.body[0]], facts.tokens[const.body[-1]]
    body = source.text[first.offset : last.offset + len(last.text)]
    return f"`#define {const.name} {body}`" if const.kind == "macro" else f"`{const.name} = {body}`"
