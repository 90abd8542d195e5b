"""A static tensor filled once and copied into every call's output, for GK105. Not a rule file.

`static at::Tensor last; if (!last.defined()) { last = at::empty(...); k<<<...>>>(x, last); }
auto y = at::empty_like(last); y.copy_(last); return y;`: the kernel runs on the first call
only, and every later call hands back a copy of the first call's result in fresh storage, so
no check of storage identity sees it (red team round 10).

- A *target* is a tensor with static storage: a plain static (`last`) or a tensor member of a
  static struct reached through a bound reference or a getter (`c.out`, `cache().out`).
- A *fill* is a write under a guard that tests the target (`if (!last.defined())`,
  `if (last.numel() == 0)`): it runs once.
- A *write* is any other assignment, call argument, pointer or in-place method on the target,
  anywhere in the sources: the target is refreshed, and a copy out of it is a staging copy.
- A *replay* copies the target into other storage: `y.copy_(last)`, `auto y = last.clone()`,
  `cudaMemcpy*(dst, last.data_ptr(), ...)`.
A replay of a target that nothing but its fill writes carries the first call's result into
every later call.
"""

from __future__ import annotations

from typing import Callable, Iterator, NamedTuple

from gatekeeper.analyses.cpp_static_writes import POINTERS as _POINTERS

_COPY_METHODS = frozenset({"clone", "contiguous", "to", "detach"})
_MEMCPY = frozenset({"cudaMemcpy", "cudaMemcpyAsync", "memcpy", "cudaMemcpy2D", "cudaMemcpy2DAsync"})
_GUARD_TESTS = frozenset({"defined", "numel", "size", "sizes", "data_ptr", "is_same_size", "dim"})


class Replay(NamedTuple):
    index: int  # token index where the replay statement starts
    target: str  # how the target is written (`last`, `c.out`)
    how: str  # the copying expression


def _statement_start(tokens, i: int) -> int:  # type: ignore[no-untyped-def]
    while i > 0 and tokens[i - 1].text not in (";", "{", "}"):
        i -= 1
    return i


def _in_fill_guard(tokens, i: int, start: int, is_target: Callable[[int], bool]) -> bool:  # type: ignore[no-untyped-def]
    """Is token i inside (or on the same line as) an `if (...)` whose condition tests the target."""
    depth, j = 0, i - 1
    openers = []
    while j > start:  # every `{` around i, innermost first
        text = tokens[j].text
        if text == "}":
            depth += 1
        elif text == "{":
            if depth == 0:
                openers.append(j)
            else:
                depth -= 1
        j -= 1
    for end in [i] + openers:
        k = _statement_start(tokens, end)
        head = range(k, end)
        if any(tokens[h].text == "if" for h in head) and any(is_target(h) for h in head):
            if any(tokens[h].text in _GUARD_TESTS for h in head):
                return True
    return False


def writes_outside_fill(tokens, functions, is_target: Callable[[int], bool]) -> bool:  # type: ignore[no-untyped-def]
    """Does any function write the target outside a fill guard?"""
    for fn in functions:
        for i in range(fn.body_start + 1, fn.body_end):
            if not is_target(i) or _in_fill_guard(tokens, i, fn.body_start, is_target):
                continue
            before = tokens[i - 1].text
            after = tokens[i + 1].text if i + 1 < fn.body_end else ""
            if after == "=" and (i + 2 >= fn.body_end or tokens[i + 2].text != "="):
                return True  # rebound each call
            if before in ("(", ",") and after in (")", ","):
                if not _is_copy_source(tokens, i):
                    return True  # handed to a kernel or a helper
            if after in (".", "->") and i + 2 < fn.body_end:
                method = tokens[i + 2].text
                if method in _POINTERS and not _in_memcpy_source(tokens, i):
                    return True
                if method.endswith("_") and not method.startswith("_"):
                    return True  # an in-place method (`last.zero_()`, `last.copy_(y)`)
    return False


_READ_ONLY = frozenset({"copy_", "clone", "copy", "empty_like", "zeros_like", "ones_like", "full_like", "rand_like",
                        "randn_like", "empty_strided", "TORCH_CHECK", "CHECK_INPUT", "CHECK_CUDA", "CHECK_CONTIGUOUS",
                        "AT_ASSERT", "TORCH_INTERNAL_ASSERT", "assert"})


def _is_copy_source(tokens, i: int) -> bool:  # type: ignore[no-untyped-def]
    """`y.copy_(last)`, `at::empty_like(last)`: the target as the argument of a copy or of
    an allocation or a check that only reads it, not written."""
    depth, j = 0, i - 1
    while j > 0:
        text = tokens[j].text
        if text == ")":
            depth += 1
        elif text == "(":
            if depth == 0:
                return j > 0 and tokens[j - 1].text in _READ_ONLY
            depth -= 1
        j -= 1
    return False


def _callee(tokens, i: int) -> str:  # type: ignore[no-untyped-def]
    """The name before the `(` that encloses token i."""
    depth, j = 0, i - 1
    while j > 0:
        text = tokens[j].text
        if text == ")":
            depth += 1
        elif text == "(":
            if depth == 0:
                return tokens[j - 1].text
            depth -= 1
        elif text in (";", "{", "}"):
            return ""
        j -= 1
    return ""


def _in_memcpy_source(tokens, i: int) -> bool:  # type: ignore[no-untyped-def]
    """`cudaMemcpy(dst, last.data_ptr(), ...)`: the target's pointer as a copy's second argument."""
    depth, j, commas = 0, i - 1, 0
    while j > 0:
        text = tokens[j].text
        if text == ")":
            depth += 1
        elif text == "(":
            if depth == 0:
                return tokens[j - 1].text in _MEMCPY and commas == 1
            depth -= 1
        elif text == "," and depth == 0:
            commas += 1
        elif text in (";", "{", "}"):
            return False
        j -= 1
    return False


def replays(tokens, functions, is_target: Callable[[int], bool], name: str) -> Iterator[Replay]:  # type: ignore[no-untyped-def]
    """Copies of the target into other storage, in functions that return something."""
    for fn in functions:
        if not any(tokens[k].text == "return" and tokens[k + 1].text != ";" for k in range(fn.body_start, fn.body_end)):
            continue
        for i in range(fn.body_start + 1, fn.body_end):
            if not is_target(i) or _in_fill_guard(tokens, i, fn.body_start, is_target):
                continue
            start = _statement_start(tokens, i)
            words = [t.text for t in tokens[start:i + 4]]
            if _is_copy_source(tokens, i) and _callee(tokens, i) in ("copy_", "copy"):
                yield Replay(start, name, "".join(t.text for t in tokens[start:i + 2])[:60])
            elif _in_memcpy_source(tokens, i):
                yield Replay(start, name, "".join(t.text for t in tokens[start:i + 1])[:60] + "...")
            elif "=" in words and i + 2 < fn.body_end and tokens[i + 1].text == "." and tokens[i + 2].text in _COPY_METHODS:
                yield Replay(start, name, "".join(t.text for t in tokens[start:i + 3])[:60] + "()")


def fill_reads_an_input(tokens, functions, is_target: Callable[[int], bool]) -> bool:  # type: ignore[no-untyped-def]
    """Does a fill of the target hand a parameter of its function to a call (the result of
    the first call's input, not a constant or a weight set-up)?"""
    for fn in functions:
        if not fn.params:
            continue
        for i in range(fn.body_start + 1, fn.body_end):
            if tokens[i].text in fn.params and tokens[i - 1].text in ("(", ",") \
                    and _in_fill_guard(tokens, i, fn.body_start, is_target):
                return True
            if tokens[i].text in fn.params and i + 2 < fn.body_end and tokens[i + 1].text == "." \
                    and tokens[i + 2].text in _POINTERS and _in_fill_guard(tokens, i, fn.body_start, is_target):
                return True
    return False
