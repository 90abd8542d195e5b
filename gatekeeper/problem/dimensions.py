"""Fixed and free dimensions: which sizes the problem's declared shapes hold still.

A dimension that every declared shape gives the same size (a head width of 128, a
quantisation group of 128, a chunk of 64) is part of the problem, not a free size: a kernel
may bake it in, and the jitter planner leaves it alone. A dimension whose size differs
between declared shapes is free.

Declared shapes come from KernelBench-Hard's `shapes.py` or the sidecar's
`[shapes] declared`; a single-file KernelBench problem can also name its fixed dimensions
outright (`[shapes] fixed = ["HEAD_DIM"]`). Inference needs at least two distinct declared
shapes: one shape says nothing about what may vary, and a sidecar `[jitter] ranges` entry for
a name says outright that it varies. The reference's own constant counts as
one more shape (gatekeeper's nominal trials use it), so a size that the declared shapes agree
on but the reference contradicts is free.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Sequence

from gatekeeper.errors import InfrastructureError


@dataclass(frozen=True)
class Dimensions:
    fixed: dict[str, int] = field(default_factory=dict)  # name: the size every declared shape gives it
    free: dict[str, tuple[int, ...]] = field(default_factory=dict)  # name: the sizes it takes, sorted
    unknown: tuple[str, ...] = ()  # sized in a way not read statically: neither fixed nor free


def classify(shapes: Sequence[dict[str, int]], constants: dict[str, int], unknown: Iterable[str] = (),
             declared_fixed: Iterable[str] = (), where: str = "the problem's sidecar",
             jittered: Iterable[str] = ()) -> Dimensions:
    """Fixed and free dimensions of the declared `shapes` (keys: reference constants).
    `jittered`: names the sidecar gives a jitter range; said outright, they stay free."""
    unknown, jittered = tuple(unknown), set(jittered)
    fixed: dict[str, int] = {}
    free: dict[str, tuple[int, ...]] = {}
    names = [n for n in dict.fromkeys(k for shape in shapes for k in shape) if n not in unknown]
    for name in names:
        nominal = constants.get(name)
        sizes = {shape.get(name, nominal) for shape in shapes}
        if nominal is not None:
            sizes.add(nominal)
        sizes.discard(None)
        if len(shapes) >= 2 and len(sizes) == 1 and name not in jittered:
            fixed[name] = sizes.pop()
        else:
            free[name] = tuple(sorted(sizes))  # type: ignore[type-var]
    for name in declared_fixed:
        if name not in constants:
            known = ", ".join(sorted(constants)) or "none"
            raise InfrastructureError(
                f"{where}: `[shapes] fixed` names {name!r}, which is not an integer constant of the problem "
                f"(its constants: {known}); name the module constant that holds the fixed size")
        if name in free and len(free[name]) > 1:
            sizes = ", ".join(map(str, free[name]))
            raise InfrastructureError(
                f"{where}: `[shapes] fixed` names {name!r}, but the declared shapes size it {sizes}; "
                f"a fixed dimension has one size in every declared shape: drop it from `fixed` or from the shapes")
        if name in jittered:
            raise InfrastructureError(
                f"{where}: `[shapes] fixed` names {name!r}, and `[jitter] ranges` gives it a range; a fixed "
                f"dimension is never jittered: drop it from one of the two")
        free.pop(name, None)
        fixed[name] = constants[name]
    return Dimensions(fixed, free, unknown)
