"""The declared shapes of a problem: KernelBench-Hard's `shapes.py`, or the sidecar's `[shapes]`.

`shapes.py` is read statically (gatekeeper.problem.shapes_eval): constants, arithmetic,
merges and comprehensions are all fine. What a static read cannot know is reported, never
refused: `DeclaredShapes.unread` says why, `unknown` names the dimensions whose sizes are
missing, and the stages that run code read the file in the sandboxed problem worker
(gatekeeper.problem.shapes_worker) instead.

Each shape is mapped onto the reference's module constants (keys match constant names
ignoring case: `batch` sizes `BATCH`); keys that name no constant (`extreme: True`, a dtype)
are not sizes and are dropped, and a size of 0 too. What cannot be meant is a problem error
(exit 3, docs/behaviour.md): SHAPES that is not a list or dict of dicts, a constant sized by
a string, a negative or absurd number, or a key one typo away from a constant.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn, Optional

from gatekeeper.errors import InfrastructureError
from gatekeeper.problem.shapes_eval import Opaque, evaluate_module

SHAPE_NAMES = ("SHAPES", "shapes", "SHAPE_LIST", "CANONICAL_SHAPES")


@dataclass(frozen=True)
class DeclaredShapes:
    shapes: tuple[dict[str, int], ...] = ()  # the sizes read, by reference constant
    unknown: tuple[str, ...] = ()  # constants some shape sizes in a way not read statically
    unread: Optional[str] = None  # why part of the declaration needs running the file; None: all read
    where: str = ""  # the file it came from

    @property
    def complete(self) -> bool:
        return self.unread is None


def read_shapes_file(path: Path, constants: dict[str, int]) -> DeclaredShapes:
    """The declared shapes of `shapes.py`, read without running it."""
    try:
        tree = ast.parse(path.read_text("utf-8-sig"), str(path))
    except (OSError, UnicodeDecodeError) as exc:
        raise InfrastructureError(f"problem file {path} cannot be read: {exc}") from None
    except SyntaxError as exc:
        raise InfrastructureError(f"problem file {path} does not parse (line {exc.lineno}): {exc.msg}; "
                                  "fix its syntax (the benchmark's harness could not import it either)") from None
    except (ValueError, RecursionError, MemoryError) as exc:  # NUL bytes, absurd nesting
        raise InfrastructureError(f"problem file {path} cannot be parsed: {type(exc).__name__}: {str(exc)[:200]}; "
                                  "write it as plain Python (the benchmark's harness imports it)") from None
    names = evaluate_module(tree)
    found = next((name for name in SHAPE_NAMES if name in names), None)
    if found is None:
        return DeclaredShapes(where=str(path))
    return shapes_from_value(names[found], constants, str(path), found)


def shapes_from_value(value: Any, constants: dict[str, int], where: str, name: str = "SHAPES") -> DeclaredShapes:
    """Shapes from SHAPES's value: a list of dicts, a dict of named dicts, or one dict.
    `Opaque` parts (a static read) become unknown dimensions and the `unread` reason."""
    if isinstance(value, Opaque):
        return DeclaredShapes(unread=f"{where}: {name} {_because(value)}", where=where)
    if value is None:  # the worker found no SHAPES: nothing declared
        return DeclaredShapes(where=where)
    if isinstance(value, dict) and value and all(isinstance(v, (dict, Opaque)) for v in value.values()):
        entries = list(value.values())
    elif isinstance(value, dict):
        entries = [value]
    elif isinstance(value, (list, tuple)):
        entries = list(value)
    else:
        _invalid(where, f"{name} is {_shown(value)}; it must be a list of dicts of sizes, e.g. "
                 f"{name} = [{{\"BATCH\": 8, \"SEQ\": 1024}}]")
    by_lower = {constant.lower(): constant for constant in constants}
    shapes: list[dict[str, int]] = []
    unknown: list[str] = []
    unread: Optional[str] = None
    for index, entry in enumerate(entries):
        if isinstance(entry, Opaque):
            unread = unread or f"{where}: {name} entry {index + 1} {_because(entry)}"
            continue
        if not isinstance(entry, dict):
            _invalid(where, f"{name} entry {index + 1} is {_shown(entry)}, not a dict of sizes")
        mapped: dict[str, int] = {}
        for key, size in entry.items():
            constant = by_lower.get(str(key).lower()) if not isinstance(key, Opaque) else None
            if constant is None:
                _refuse_typo(key, entry, by_lower, where, f"{name} entry {index + 1}")
                continue
            if isinstance(size, Opaque):
                unknown.append(constant)
                unread = unread or f"{where}: {name} entry {index + 1} sizes {key} {_because(size)}"
            elif isinstance(size, int) and not isinstance(size, bool) and 0 < size <= MAX_SIZE:
                mapped[constant] = size
            elif not (isinstance(size, int) and not isinstance(size, bool) and size == 0):  # 0: not a size, dropped
                _invalid(where, f"{name} entry {index + 1} sizes {key} (the reference's {constant}) as "
                         f"{_shown(size)}; a size is a whole number from 1 to {MAX_SIZE:,}")
        if mapped and mapped not in shapes:
            shapes.append(mapped)
    return DeclaredShapes(tuple(shapes), tuple(dict.fromkeys(unknown)), unread, where)


MAX_SIZE = 2 ** 31 - 1  # past int32, a size no kernel indexes
# No bound on the product of one entry's sizes: they size different tensors (a paged KV cache's
# block count, its context length and the batch), so their product is no tensor's size.


def _invalid(where: str, what: str) -> NoReturn:
    raise InfrastructureError(f"problem error: {where}: {what}; fix shapes.py (every check against this problem "
                              "would otherwise run shapes nobody declared)")


def _refuse_typo(key: Any, entry: dict, by_lower: dict[str, str], where: str, place: str) -> None:
    """A key one letter (or one swap) away from a constant the entry does not size is a typo
    (`BTACH` for `BATCH`): dropping it would silently run the reference's own size instead."""
    if isinstance(key, Opaque) or len(str(key)) < 3:
        return
    sized = {str(k).lower() for k in entry if not isinstance(k, Opaque)}
    lowered = str(key).lower()
    for lower, constant in by_lower.items():
        if lower not in sized and _one_edit(lowered, lower):
            _invalid(where, f"{place} has key {key!r}, which names no constant of the reference; did you mean "
                     f"{constant!r}?")


def _one_edit(a: str, b: str) -> bool:
    """Whether `a` becomes `b` by one substitution, insertion, deletion or swap of neighbours."""
    if a == b or abs(len(a) - len(b)) > 1:
        return False
    if len(a) == len(b):
        diff = [i for i in range(len(a)) if a[i] != b[i]]
        return len(diff) == 1 or (len(diff) == 2 and diff[1] == diff[0] + 1 and a[diff[0]] == b[diff[1]]
                                  and a[diff[1]] == b[diff[0]])
    short, long_ = (a, b) if len(a) < len(b) else (b, a)
    return any(long_[:i] + long_[i + 1:] == short for i in range(len(long_)))


def _shown(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text[:60]}{'...' if len(text) > 60 else ''}"


def _because(opaque: Opaque) -> str:
    return f"is not readable without running the file: {opaque.where()}"
