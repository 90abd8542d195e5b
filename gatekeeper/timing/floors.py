"""Physical floors: the least time a problem can take on a device.

Three times, and the floor is the largest:
- memory: the bytes the problem must move (each input, parameter and buffer read once, each
  output written once), over the device's peak bandwidth;
- compute: the FLOPs torch's FlopCounterMode counts on the reference (matrix products,
  convolutions, attention; elementwise work is not counted, which keeps the floor low), or
  the sidecar TOML's `flops`, over the peak matrix rate for the problem's dtype;
- launch: one minimal kernel timed on the device by the same method (calibrate.py).

Counting runs the reference, which is trusted; it works on CPU tensors too.
"""

from __future__ import annotations

import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterable, Optional

from gatekeeper.timing.specs import GpuSpec, peak_tflops

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def _tensors(values: Any) -> Iterable[Any]:
    import torch

    if isinstance(values, torch.Tensor):
        yield values
    elif isinstance(values, (list, tuple)):
        for v in values:
            yield from _tensors(v)
    elif isinstance(values, dict):
        for v in values.values():
            yield from _tensors(v)


def unique_bytes(values: Any) -> int:
    """Bytes of the distinct storages the tensors in `values` span (a view or a repeated
    argument is read once)."""
    seen: set[tuple[Any, int]] = set()
    total = 0
    for t in _tensors(values):
        key = (t.device, t.untyped_storage().data_ptr())
        if key in seen:
            continue
        seen.add(key)
        total += t.untyped_storage().nbytes()
    return total


def dominant_dtype(values: Any) -> str:
    """The floating dtype holding the most bytes: the one the work is done in."""
    by_dtype: dict[str, int] = {}
    for t in _tensors(values):
        if t.is_floating_point():
            name = str(t.dtype).replace("torch.", "")
            by_dtype[name] = by_dtype.get(name, 0) + t.numel() * t.element_size()
    if not by_dtype:
        return "float32"
    return max(by_dtype.items(), key=lambda kv: kv[1])[0]


@dataclass
class Counts:
    bytes_moved: int
    flops: int
    flops_source: str  # "flop_counter" | "sidecar" | "none"
    dtype: str
    outputs: Any = None  # the reference outputs, for the caller; not part of the report

    def as_dict(self) -> dict[str, Any]:
        return {"bytes_moved": self.bytes_moved, "flops": self.flops, "flops_source": self.flops_source,
                "dtype": self.dtype}


def sidecar_flops(problem_path: Optional[Path]) -> Optional[int]:
    """`flops` from `<problem>.toml` beside the problem, if the file has it."""
    if problem_path is None:
        return None
    sidecar = Path(problem_path).with_suffix(".toml")
    if not sidecar.is_file():
        return None
    try:
        value = tomllib.loads(sidecar.read_text("utf-8")).get("flops")
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0:
        return int(value)
    return None


def count(model: Any, inputs: list[Any], problem_path: Optional[Path] = None) -> Counts:
    """Run the reference once under the FLOP counter and count what it must move."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    with torch.no_grad():
        counter = FlopCounterMode(display=False)
        with counter:
            outputs = model(*inputs)
    flops = int(counter.get_total_flops())
    source = "flop_counter"
    if flops == 0:
        side = sidecar_flops(problem_path)
        if side is not None:
            flops, source = side, "sidecar"
        else:
            source = "none"
    state = list(model.parameters()) + list(model.buffers()) if hasattr(model, "parameters") else []
    moved = unique_bytes([list(inputs), state]) + unique_bytes(outputs)
    return Counts(bytes_moved=moved, flops=flops, flops_source=source,
                  dtype=dominant_dtype([list(inputs), state]), outputs=outputs)


@dataclass
class Floors:
    memory_floor_us: float
    compute_floor_us: float
    launch_floor_us: Optional[float]
    floor_us: float  # the largest of the three: below it, a time is implausible
    roofline_floor_us: float  # the larger of memory and compute: the hardware's speed of light
    bound: str  # which of the three is largest: "memory" | "compute" | "launch"
    bandwidth_gbps: float
    peak_tflops: float

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def memory_time_us(bytes_moved: int, bandwidth_gbps: float) -> float:
    return bytes_moved / (bandwidth_gbps * 1e9) * 1e6 if bandwidth_gbps > 0 else 0.0


def compute_time_us(flops: int, tflops: float) -> float:
    return flops / (tflops * 1e12) * 1e6 if tflops > 0 else 0.0


def floors(counts: Counts, spec: GpuSpec, launch_floor_us: Optional[float],
           fp32_matmul_rate: str = "tf32") -> Floors:
    peak = peak_tflops(spec, counts.dtype, fp32_matmul_rate)
    parts = {
        "memory": memory_time_us(counts.bytes_moved, spec.bandwidth_gbps),
        "compute": compute_time_us(counts.flops, peak),
        "launch": launch_floor_us or 0.0,
    }
    bound = max(parts, key=lambda k: parts[k])
    return Floors(memory_floor_us=parts["memory"], compute_floor_us=parts["compute"],
                  launch_floor_us=launch_floor_us, floor_us=parts[bound],
                  roofline_floor_us=max(parts["memory"], parts["compute"]), bound=bound,
                  bandwidth_gbps=spec.bandwidth_gbps, peak_tflops=peak)


def measured_roofline_us(counts: Counts, copy_gbps: Optional[float], matmul_tflops: Optional[float],
                         ) -> Optional[float]:
    """The roofline against the ceilings measured on this device (a large copy, a large
    matrix product): what well-written code reaches. Not used for implausibility, since good
    code can edge past a library's copy."""
    if not copy_gbps:
        return None
    parts = [memory_time_us(counts.bytes_moved, copy_gbps)]
    if matmul_tflops and counts.flops:
        parts.append(compute_time_us(counts.flops, matmul_tflops))
    return max(parts)


def measured_matmul_rate(dtype: str, rates: dict[str, Any]) -> Optional[float]:
    """The measured matrix rate that bounds work in `dtype`. float32 inputs reach the TF32
    tensor-core rate wherever torch allows it (cuDNN convolutions by default), so their
    ceiling is the faster of the two measured rates, as the datasheet floor assumes TF32
    (`floors(..., fp32_matmul_rate="tf32")`). With the plain float32 rate alone, a cuDNN
    convolution on an H100 ran at 159% of its "ceiling" (docs/gpu-validation.md, sixth round)."""
    rate = rates.get(dtype)
    if dtype == "float32" and isinstance(rates.get("tf32"), (int, float)):
        rate = max(rate or 0.0, rates["tf32"])
    return rate if isinstance(rate, (int, float)) and rate > 0 else None
