"""Checked calls that start the way timed calls do: with work still queued on the caller's
current stream (red team round 8).

A timed call on a GPU starts while the stream is busy (timing.blocks queues a spin before its
start event), and a checked call used to start on an idle one (the input digests synchronise
the device). That difference told them apart (`cudaStreamQuery(current)`), and it hid work on
a side stream that is not ordered after the current stream: launched at once, it runs during
the spin, before the start event, and no event sees it.

On the calls drawn for it (schedule_checks.queued_indices), the worker gives the call inputs
whose values are written by the current stream itself, behind a spin: each tensor input is
copied into a new tensor that first holds other values (NaN, or every bit flipped), the device
is synchronised, a spin is queued, then the copies of the real values, then forward is called
at once. Code that orders its work after the current stream, as any caller's pipeline needs,
reads the real values; a side stream that does not reads the other ones, and the call's
output is wrong (GK641). A branch on whether the stream is busy takes its timed path here, and
so does one on a cold L2 or on the allocator's size: an L2 flush as the timing stage's is
queued last, from a buffer of the same size.
"""

from __future__ import annotations

from typing import Any

SPIN_US = 1000.0  # longer than a side stream needs to start and read its inputs


def queue_behind_work(inputs: list[Any], device: str) -> tuple[list[Any], list[Any]]:
    """(the inputs to call forward with, the tensors that must stay alive until the call has
    run). Unchanged on the CPU, or when no input is a contiguous CUDA tensor."""
    import torch

    if not str(device).startswith("cuda") or not torch.cuda.is_available():
        return inputs, []
    out: list[Any] = []
    pairs: list[tuple[Any, Any]] = []
    for value in inputs:
        if isinstance(value, torch.Tensor) and value.is_cuda and value.numel() and value.is_contiguous():
            target = torch.empty_like(value, memory_format=torch.contiguous_format)
            _other_values(target, value)
            pairs.append((target, value))
            out.append(target)
        else:
            out.append(value)
    if not pairs:
        return inputs, []
    device_of = pairs[0][0].device
    torch.cuda.synchronize()  # the other values are in place before anything below is queued
    torch.cuda._sleep(_cycles(SPIN_US, device_of))
    for target, source in pairs:
        target.copy_(source, non_blocking=True)  # on the current stream, behind the spin
    _flush(device_of)  # last: the inputs leave L2 as a timed call's have, and the allocator holds what timing's does
    return out, [source for _, source in pairs]


_FLUSH: dict[str, Any] = {}


def _flush(device: Any) -> None:
    """Write a buffer of twice the L2 size, as the timing stage does before each timed call
    (timing.method.L2Flush): the same cold cache and the same allocator footprint, so neither
    an L2 probe on the device nor `memory_reserved()` tells this call from a timed one."""
    import torch

    key = str(device)
    buffer = _FLUSH.get(key)
    if buffer is None:
        l2 = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0) or 50 << 20
        buffer = _FLUSH[key] = torch.empty(max(2 * l2 // 4, 1 << 20), dtype=torch.int32, device=device)
    buffer.fill_(0)


def _other_values(target: Any, source: Any) -> None:
    """Fill `target` with values that differ from `source`'s in every element."""
    import torch

    if target.is_floating_point() or target.is_complex():
        target.fill_(float("nan"))
    elif target.dtype == torch.bool:
        torch.logical_not(source, out=target)
    else:
        torch.bitwise_not(source, out=target)


def _cycles(us: float, device: Any) -> int:
    import torch

    props = torch.cuda.get_device_properties(device if device is not None else torch.cuda.current_device())
    khz = getattr(props, "clock_rate", 0) or 2_000_000
    return int(us * khz / 1e3)
