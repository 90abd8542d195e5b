"""Skip libcst's per-node validation while the native parser builds a tree.

Every libcst node runs `_validate()` when it is constructed. For a tree the native parser
has just built from source that parsed, the checks cannot fail (libcst's own comment on
`CSTNode.__post_init__` says as much), yet they cost about 15% of `parse_module` on real
submissions. While a pause is open, `CSTNode.__post_init__` is a no-op; nodes built
elsewhere at that moment (another thread) skip validation too, which only loses the
early error for a malformed node built by hand. Nested and concurrent pauses keep it off
until the last one ends; the original is always what is put back.
"""

from __future__ import annotations

from typing import ContextManager

from libcst import CSTNode

from gatekeeper.static.nested_pause import NestedPause

# A libcst without this hook (none so far) gets a pause that changes nothing.
_ORIGINAL = CSTNode.__dict__.get("__post_init__")


def _skip(self: CSTNode) -> None:
    return None


def _pause() -> None:
    if _ORIGINAL is not None:
        CSTNode.__post_init__ = _skip  # type: ignore[method-assign]


def _resume(_: None) -> None:
    if _ORIGINAL is not None:
        CSTNode.__post_init__ = _ORIGINAL  # type: ignore[method-assign]


_PAUSE = NestedPause(_pause, _resume)


def node_validation_paused() -> ContextManager[None]:
    return _PAUSE()
