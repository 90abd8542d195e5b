"""The forward path: the functions that run when the model is called.

Roots are the `forward` (and `__call__`) methods of the submission's classes and a
module-level `forward`; in a module with neither (a helper module the submission imports),
every function it defines. From them the call graph the traversal recorded (`ctx.calls`,
callee -> callers) is followed to every function they reach. What is reached only from
`__init__`, from module level, from `get_inputs`/`get_init_inputs` (harness glue copied
from the reference) or from `backward` runs at construction or set-up time, not in the
timed call.

A function no call reaches but whose name appears elsewhere in the file (a dispatch dict,
`getattr(self, name)`, a callback) counts as forward: the graph cannot see how it is
called, so it is not given the benefit of the doubt.
"""

from __future__ import annotations

import re
from typing import Protocol


class CallGraph(Protocol):
    """What the forward path reads from the file context (FileContext has it). A Protocol, not
    an import of context.py, which calls in_forward: no import circle, not even for types."""

    text: str
    calls: dict[str, set[str]]  # callee -> callers
    defined: set[str]

MODULE_KEY = "<module>"
ROOT_NAMES = frozenset({"forward", "__call__"})
# Entry points that never run inside the timed call.
NOT_FORWARD = frozenset({"get_inputs", "get_init_inputs", "backward", "__init__", "extra_repr"})


def _last(key: str) -> str:
    return key.rsplit(".", 1)[-1]


def _callees(ctx: CallGraph) -> dict[str, set[str]]:
    """caller key -> callee keys, a bare callee name mapped to every definition of it."""
    by_last: dict[str, set[str]] = {}
    for key in ctx.defined:
        by_last.setdefault(_last(key), set()).add(key)
    out: dict[str, set[str]] = {}
    for callee, callers in ctx.calls.items():
        targets = {callee} if callee in ctx.defined else by_last.get(_last(callee), set())
        for caller in callers:
            out.setdefault(caller, set()).update(targets)
    return out


def is_root(ctx: CallGraph, key: str) -> bool:
    if _last(key) not in ROOT_NAMES:
        return False
    # The reference's own `Model` copied into the submission is not the submission's path.
    return not (key.startswith("Model.") and "ModelNew.forward" in ctx.defined)


def compute_forward_keys(ctx: CallGraph) -> frozenset[str]:
    callees = _callees(ctx)
    called = {k for targets in callees.values() for k in targets}
    reached: set[str] = set()
    stack = [k for k in ctx.defined if is_root(ctx, k)]
    # an op body registered with torch.library runs whenever the op is called: torch.ops.<ns>.<op>
    # names no function, so the body is a root (analyses/op_registrations.py)
    stack += [k for k in ctx.__dict__.get("_gk_op_bodies", ()) if k in ctx.defined]
    if not stack:
        # A module with no forward at all: a submission's own helper module (gatekeeper/submission_files.py),
        # whose functions the submission calls from its forward. Every function it defines may
        # run in the timed call.
        stack = [k for k in ctx.defined if k != MODULE_KEY]
    # Indirectly used functions: referenced by name beyond their own `def`, never called.
    for key in ctx.defined:
        name = _last(key)
        if key in called or name in NOT_FORWARD or name.startswith("__") or is_root(ctx, key):
            continue
        uses, defs = _occurrences(ctx.text, name)
        if uses > defs:
            stack.append(key)
    while stack:
        key = stack.pop()
        if key in reached or _last(key) in NOT_FORWARD:
            continue
        reached.add(key)
        stack.extend(callees.get(key, ()))
    return frozenset(reached)


_SCAN_LIMIT = 256


def _occurrences(text: str, name: str) -> tuple[int, int]:
    """How often `name` occurs in `text` as a whole word, and how often as `def name`.
    A find loop, not a regex: compiling a pattern per function name cost more than the
    search (each name is new to re's cache). A name found very often falls back to regexes."""
    uses = defs = scanned = 0
    size, end_of_text = len(name), len(text)
    at = text.find(name)
    while at >= 0:
        scanned += 1
        if scanned > _SCAN_LIMIT:
            return _occurrences_by_regex(text, name)
        end = at + size
        if (at == 0 or not _is_word(text[at - 1])) and (end == end_of_text or not _is_word(text[end])):
            uses += 1
            start = at
            while start > 0 and text[start - 1].isspace():
                start -= 1
            if start < at and start >= 3 and text.startswith("def", start - 3) \
                    and (start == 3 or not _is_word(text[start - 4])):
                defs += 1
            at = text.find(name, end)
        else:
            at = text.find(name, at + 1)
    return uses, defs


def _is_word(char: str) -> bool:
    return char.isalnum() or char == "_"  # what `\w` matches in a str pattern


def _occurrences_by_regex(text: str, name: str) -> tuple[int, int]:
    word = re.escape(name)
    return (len(re.findall(rf"(?<![\w.]){word}\b|\.{word}\b", text)),
            len(re.findall(rf"\bdef\s+{word}\b", text)))


def in_forward(ctx: CallGraph, key: str) -> bool:
    """True when the function `key` runs inside the model's call."""
    if key == MODULE_KEY:
        return False
    keys = ctx.__dict__.get("_forward_keys")
    if keys is None:
        keys = ctx.__dict__["_forward_keys"] = compute_forward_keys(ctx)
    if key in keys:
        return True
    # Nested functions and lambdas carry their enclosing function's key.
    return False
