"""Skip libcst's per-node validation while the native parser builds a tree.

Every libcst node runs `_validate()` when it is constructed. For a tree the native parser
has just built from source that parsed, the checks cannot fail (libcst's own comment on
`CSTNode.__post_init__` says as much), yet they cost about 15% of `parse_module` on real
submissions. While a pause is open, node construction skips them; nodes built elsewhere
at that moment (another thread) skip them too, which only loses the early error for a
malformed node built by hand. Nested and concurrent pauses keep it off until the last one
ends.

The first pause puts a hook in `CSTNode.__post_init__` that validates unless a pause is
open, and leaves it there: assigning a class attribute of CSTNode invalidates the method
caches of all ~250 node classes, which cost ~0.5% of the static stage when done twice a
file. Outside a pause the hook calls what was there before, so validation is unchanged.
"""

from __future__ import annotations

from typing import Callable, ContextManager, Optional

from libcst import CSTNode

from gatekeeper.static.nested_pause import NestedPause
from gatekeeper.static.node_init import install_fast_node_inits

_paused = False
_validate: Optional[Callable[[CSTNode], None]] = None  # what `__post_init__` was before the hook


def _hook(self: CSTNode) -> None:
    if not _paused:
        _validate(self)  # type: ignore[misc]


def _pause() -> None:
    global _paused, _validate
    current = CSTNode.__dict__.get("__post_init__")
    if current is None:
        return  # a libcst without this hook (none so far): the pause changes nothing
    if current is not _hook:  # first pause, or someone replaced the hook since: wrap what is there
        _validate = current
        CSTNode.__post_init__ = _hook  # type: ignore[method-assign]
        install_fast_node_inits()  # once per process, like the hook (node_init.py)
    _paused = True


def _resume(_: None) -> None:
    global _paused
    _paused = False


_PAUSE = NestedPause(_pause, _resume)


def node_validation_paused() -> ContextManager[None]:
    return _PAUSE()
