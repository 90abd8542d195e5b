"""The declared shapes of a problem: KernelBench-Hard's `shapes.py`, or the sidecar's `[shapes]`.

`shapes.py` is read statically (gatekeeper.problem.shapes_eval): constants, arithmetic,
merges and comprehensions are all fine. What a static read cannot know is reported, never
refused: `DeclaredShapes.unread` says why, `unknown` names the dimensions whose sizes are
missing, and the stages that run code read the file in the sandboxed problem worker
(gatekeeper.problem.shapes_worker) instead.

Each shape is mapped onto the reference's module constants (keys match constant names
ignoring case: `batch` sizes `BATCH`); keys that name no constant and values that are not
positive integers (`extreme: True`, a dtype) are not sizes and are dropped.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

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
    if isinstance(value, dict) and value and all(isinstance(v, (dict, Opaque)) for v in value.values()):
        entries = list(value.values())
    elif isinstance(value, dict):
        entries = [value]
    elif isinstance(value, (list, tuple)):
        entries = [v for v in value if isinstance(v, (dict, Opaque))]
    else:
        return DeclaredShapes(where=where)
    by_lower = {constant.lower(): constant for constant in constants}
    shapes: list[dict[str, int]] = []
    unknown: list[str] = []
    unread: Optional[str] = None
    for index, entry in enumerate(entries):
        if isinstance(entry, Opaque):
            unread = unread or f"{where}: {name} entry {index + 1} {_because(entry)}"
            continue
        mapped: dict[str, int] = {}
        for key, size in entry.items():
            constant = by_lower.get(str(key).lower()) if not isinstance(key, Opaque) else None
            if constant is None:
                continue
            if isinstance(size, Opaque):
                unknown.append(constant)
                unread = unread or f"{where}: {name} entry {index + 1} sizes {key} {_because(size)}"
            elif isinstance(size, int) and not isinstance(size, bool) and size > 0:
                mapped[constant] = size
        if mapped and mapped not in shapes:
            shapes.append(mapped)
    return DeclaredShapes(tuple(shapes), tuple(dict.fromkeys(unknown)), unread, where)


def _because(opaque: Opaque) -> str:
    return f"is not readable without running the file: {opaque.where()}"
