"""The inputs of a scheduled call, as the submission's worker builds them (behaviour.schedule_subject,
behaviour.timing_loop): fresh tensors at `_version` 0, values written in place into the previous
call's tensors, new tensor objects over the previous call's storage, or the previous call's
tensors again; and the switch that runs a call as a timing loop would, without the poison."""

from __future__ import annotations

import contextlib
from typing import Any, Iterator, Optional

from gatekeeper.sandbox.tensors import unpack


@contextlib.contextmanager
def unpoisoned(active: bool) -> Iterator[None]:
    """An `again` call runs as a timing loop runs it: fresh allocations are not NaN-filled. The
    poison would otherwise tell it apart, and hide the allocator handing back the dropped
    previous output's block with its values in it (code that skips its work when the inputs
    are the same objects and its `torch.empty` output already holds the answer: caught by
    time, behaviour.repeat_probe)."""
    import torch

    if not active:
        yield
        return
    try:
        was, warn_only = torch._C._get_deterministic_algorithms(), torch._C._get_deterministic_algorithms_warn_only()
    except AttributeError:
        yield
        return
    torch._C._set_deterministic_algorithms(False)
    try:
        yield
    finally:
        torch._C._set_deterministic_algorithms(was, warn_only=warn_only)


def _over(storage: Any, like: Any) -> Any:
    """A new tensor object over `storage` with `like`'s shape, at `_version` 0 as a benchmark's
    `torch.randn` input is: `set_` is an in-place op and would make it 1, which tells the
    schedule's inputs from a benchmark's (a memo armed only on version 0: red team 2026-12-06,
    round 6, h01). Below the ADInplaceOrView key the version counter is not bumped."""
    import torch

    guard = getattr(torch._C, "_AutoDispatchBelowADInplaceOrView", None)
    with guard() if guard is not None else contextlib.nullcontext():
        return torch.empty(0, dtype=like.dtype, device=like.device).set_(storage, 0, like.shape, like.stride())


def _fits(old: Any, new: Any) -> bool:
    import torch

    return isinstance(old, torch.Tensor) and isinstance(new, torch.Tensor) and old.shape == new.shape \
        and old.dtype == new.dtype and old.device == new.device


def write_in_place(previous: list[Any], fresh: list[Any]) -> tuple[list[Any], bool]:
    """`fresh`'s values in `previous`'s very tensors (same objects, `_version` bumped, as an
    `overwrite` call's); a tensor that does not fit is passed as the new one. Returns the
    inputs and whether every tensor was written in place."""
    import torch

    if len(previous) != len(fresh):
        return list(fresh), False
    out, in_place = [], True
    for old, new in zip(previous, fresh):
        if _fits(old, new):
            old.copy_(new)
            out.append(old)
        else:
            in_place = in_place and not isinstance(new, torch.Tensor)
            out.append(new)
    return out, in_place


def build_inputs(kind: str, packed: list[Any], previous: Optional[list[Any]], device: str) -> list[Any]:
    import torch

    if kind == "again" and previous is not None:
        return list(previous)  # the very objects of the call before, untouched: a timing loop's inputs
    fresh = [unpack(p, device) if isinstance(p, dict) and p.get("__tensor__") else p for p in packed]
    if previous is None or kind not in ("overwrite", "reuse"):
        return [_over(t.untyped_storage(), t) if isinstance(t, torch.Tensor) else t for t in fresh]
    out = []
    for old, new in zip(previous, fresh):
        if not _fits(old, new):
            out.append(_over(new.untyped_storage(), new) if isinstance(new, torch.Tensor) else new)
        elif kind == "overwrite":
            old.copy_(new)  # the same objects, new values
            out.append(old)
        else:
            _over(old.untyped_storage(), old).copy_(new)  # written through another tensor object
            out.append(_over(old.untyped_storage(), old))
    return out
