"""GK007: the notice that part of the problem's declared shapes was not read statically.

A static-only check never runs problem code, so a `shapes.py` that builds its shapes with
a helper function (or an import) is read as far as a static read goes. The dimensions it
could not follow are neither fixed nor free for the rules; the report says which, as a note,
and the check goes on: a problem is never refused for the way it spells its shapes.
"""

from __future__ import annotations

from typing import Optional

from gatekeeper.report import Category, Finding, Severity, StageName
from gatekeeper.static.rule import Rule


class ShapesNotReadStatically(Rule):
    """The problem's `shapes.py` (KernelBench-Hard) builds part of its declared shapes in a
    way a static read cannot follow: a call of a helper function, an imported value, a loop
    over unknown data. A static-only check runs no problem code, so the dimensions sized
    there are unknown to the static rules: neither a fixed dimension (one size in every
    declared shape, which a kernel may bake in) nor a free one.

    Nothing is refused for it. The stages that run code (build, behaviour, timing) read the
    file in the sandboxed problem worker and use every declared shape. To have the static
    rules see them too, write the sizes with constants, arithmetic and comprehensions
    (`E = 256`, `SHAPES = [{"E": E, "H": 4 * 1024}]`)."""

    code = "GK007"
    name = "ShapesNotReadStatically"
    category = Category.HARDCODED_SHAPE
    severity = Severity.INFO
    summary = "part of the problem's declared shapes needs running shapes.py"
    message = ("The problem's declared shapes were not all read without running code: {why}. "
               "{dims} for the static rules (neither fixed nor free).")
    hint = ("Run the full check (without --static-only) to read shapes.py in the sandboxed worker, or write its "
            "sizes with constants, arithmetic and comprehensions so a static read can follow them.")
    source_file = __file__


def shapes_notice(problem: object, config) -> Optional[Finding]:  # type: ignore[no-untyped-def]
    """GK007 when the problem's declared shapes were read only in part; else None."""
    why = getattr(problem, "shapes_unread", None)
    if why is None:
        return None
    settings = config.rule(ShapesNotReadStatically.code)
    if not settings.enabled:
        return None
    unknown = tuple(getattr(problem, "unknown_dims", ()))
    dims = (f"Unknown dimension(s): {', '.join(unknown)}" if unknown
            else "Every dimension those shapes size is unknown")
    return Finding(
        rule=ShapesNotReadStatically.code, name=ShapesNotReadStatically.name,
        category=ShapesNotReadStatically.category,
        severity=settings.severity or ShapesNotReadStatically.severity_for(config.profile), stage=StageName.STATIC,
        message=ShapesNotReadStatically.message.format(why=why, dims=dims),
        hint=ShapesNotReadStatically.hint, evidence={"unknown_dims": list(unknown), "why": why},
    )
