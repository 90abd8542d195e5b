"""Peak rates of GPUs, for the physical floors.

Numbers are dense (no structured sparsity) peaks written from the vendors' datasheets. A
floor must be a lower bound, so where a datasheet leaves doubt the table errs high (a faster
device, hence a lower floor): a false `timing-implausible` costs as much as a miss. The
device's own reported properties win where torch reports them (L2 size, multiprocessors,
memory clock and bus width).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, replace
from typing import Any, Optional

_MB = 1024 * 1024
SOURCE = "vendor datasheet"


@dataclass(frozen=True)
class GpuSpec:
    name: str
    bandwidth_gbps: float  # peak DRAM bandwidth, GB/s (10^9 bytes)
    fp32_tflops: float  # non-tensor fp32
    tf32_tflops: float  # tensor-core tf32, dense (= fp32 where the chip has no tf32)
    fp16_tflops: float  # tensor-core fp16, dense, fp32 accumulate where stated
    bf16_tflops: float  # tensor-core bf16, dense (fp16's rate where the chip lacks bf16: errs high)
    l2_bytes: Optional[int]
    sms: Optional[int]
    source: str = SOURCE

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _s(name, bw, fp32, tf32, fp16, bf16, l2_mb, sms) -> GpuSpec:
    return GpuSpec(name, bw, fp32, tf32, fp16, bf16, int(l2_mb * _MB) if l2_mb else None, sms)


# (pattern over the lower-cased device name, spec); the first match wins, so specific first.
TABLE: list[tuple[str, GpuSpec]] = [
    (r"gh200", _s("GH200", 4900, 67, 495, 990, 990, 50, 132)),
    (r"h200.*nvl", _s("H200 NVL", 4800, 60, 418, 836, 836, None, 132)),
    (r"h200", _s("H200 SXM", 4800, 67, 495, 990, 990, None, 132)),
    (r"h100.*nvl", _s("H100 NVL", 3900, 60, 418, 836, 836, 50, 132)),
    (r"h100.*pcie", _s("H100 PCIe", 2000, 51, 378, 756, 756, 50, 114)),
    (r"h100", _s("H100 SXM", 3350, 67, 495, 990, 990, 50, 132)),
    (r"b200", _s("B200", 8000, 80, 1250, 2500, 2500, None, 148)),  # per-GPU figures vary by system: high end
    (r"a100.*sxm.*80", _s("A100 80GB SXM", 2039, 19.5, 156, 312, 312, 40, 108)),
    (r"a100.*80.*pcie|a100.*pcie.*80", _s("A100 80GB PCIe", 1935, 19.5, 156, 312, 312, 40, 108)),
    (r"a100.*sxm", _s("A100 40GB SXM", 1555, 19.5, 156, 312, 312, 40, 108)),
    (r"a100.*pcie", _s("A100 40GB PCIe", 1555, 19.5, 156, 312, 312, 40, 108)),
    (r"a100", _s("A100", 2039, 19.5, 156, 312, 312, 40, 108)),
    (r"l40s", _s("L40S", 864, 91.6, 183, 362, 362, 96, 142)),
    (r"l40\b", _s("L40", 864, 90.5, 90.5, 181, 181, 96, 142)),
    (r"\bl4\b", _s("L4", 300, 30.3, 60, 121, 121, 48, 58)),
    (r"a10g", _s("A10G", 600, 35, 70, 140, 140, 6, 80)),  # 80 SMs to the A10's 72
    (r"\ba10\b", _s("A10", 600, 31.2, 62.5, 125, 125, 6, 72)),
    (r"rtx 6000 ada", _s("RTX 6000 Ada", 960, 91.1, 182, 364, 364, 96, 142)),
    (r"rtx 4090", _s("RTX 4090", 1008, 82.6, 82.6, 330.3, 165.2, 72, 128)),  # fp16 with fp16 accumulate
    (r"v100.*sxm", _s("V100 SXM2", 900, 15.7, 15.7, 125, 125, 6, 80)),
    (r"v100", _s("V100 PCIe", 900, 14, 14, 112, 112, 6, 80)),
    (r"\bt4\b", _s("T4", 320, 8.1, 8.1, 65, 65, 4, 40)),
]


def lookup(device_name: str) -> Optional[GpuSpec]:
    low = device_name.lower()
    for pattern, spec in TABLE:
        if re.search(pattern, low):
            return spec
    return None


def reported_bandwidth_gbps(props: Any) -> Optional[float]:
    """Peak DRAM bandwidth from the memory clock (kHz) and bus width (bits), double data rate,
    where this torch reports them; None otherwise."""
    clock_khz = getattr(props, "memory_clock_rate", None)
    bus_bits = getattr(props, "memory_bus_width", None)
    if not clock_khz or not bus_bits:
        return None
    return clock_khz * 1e3 * 2 * bus_bits / 8 / 1e9


def resolve(device_name: str, props: Any = None) -> tuple[Optional[GpuSpec], dict[str, str]]:
    """The spec for this device, with the device's own properties preferred.

    Returns the spec (None for an unknown device with nothing reported) and, per field, where
    the value came from ("device" or "vendor datasheet"), for the report.
    """
    spec = lookup(device_name)
    origin: dict[str, str] = {}
    if spec is not None:
        origin = {k: SOURCE for k in ("bandwidth_gbps", "fp32_tflops", "tf32_tflops", "fp16_tflops",
                                      "bf16_tflops", "l2_bytes", "sms")}
    if props is None:
        return spec, origin
    l2 = getattr(props, "L2_cache_size", None) or None
    sms = getattr(props, "multi_processor_count", None) or None
    bw = reported_bandwidth_gbps(props)
    if spec is None:
        if bw is None:
            return None, {}
        spec = GpuSpec(device_name, bw, 0.0, 0.0, 0.0, 0.0, l2, sms, source="device")
        return spec, {"bandwidth_gbps": "device", "l2_bytes": "device", "sms": "device"}
    updates: dict[str, Any] = {}
    if l2:
        updates["l2_bytes"] = int(l2)
        origin["l2_bytes"] = "device"
    if sms:
        updates["sms"] = int(sms)
        origin["sms"] = "device"
    # A reported clock that disagrees wildly with the datasheet is more likely a unit quirk
    # than a different memory system; keep the datasheet then.
    if bw is not None and 0.5 <= bw / spec.bandwidth_gbps <= 2.0:
        updates["bandwidth_gbps"] = bw
        origin["bandwidth_gbps"] = "device"
    return replace(spec, **updates), origin


def peak_tflops(spec: GpuSpec, dtype: str, fp32_matmul_rate: str = "tf32") -> float:
    """The matrix rate that bounds work in `dtype` (a torch dtype name, e.g. "float32")."""
    dtype = dtype.replace("torch.", "")
    if dtype in ("bfloat16",):
        return spec.bf16_tflops
    if dtype in ("float16", "half"):
        return spec.fp16_tflops
    if dtype in ("float32", "float", "float64", "double"):
        # float64 work cannot run faster than float32 work on these parts: the fp32 rate is a
        # lower floor for it. tf32 is the default for float32 because a submission may use it
        # within tolerance; the behaviour stage judges precision, not the floor.
        return max(spec.tf32_tflops, spec.fp32_tflops) if fp32_matmul_rate == "tf32" else spec.fp32_tflops
    # Integer and 8-bit types: the fastest rate in the table keeps the floor a lower bound.
    return max(spec.bf16_tflops, spec.fp16_tflops, spec.tf32_tflops, spec.fp32_tflops) * 2
