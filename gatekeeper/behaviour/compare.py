"""Comparing outputs in the trusted parent (it has never imported the submission)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from gatekeeper.sandbox.tensors import is_packed, unpack


@dataclass
class Comparison:
    ok: bool
    reason: str = ""  # shape | values | nan | structure
    detail: str = ""
    evidence: dict[str, Any] = field(default_factory=dict)


def _as_list(value: Any) -> list[Any]:
    if is_packed(value):
        return [value]
    if isinstance(value, list):
        return value
    return [value]


def compare(reference: Any, got: Any, tolerances: Any) -> Comparison:
    """`tolerances(dtype_name) -> (atol, rtol)`. Both sides are packed tensors or lists of them."""
    refs, gots = _as_list(reference), _as_list(got)
    if len(refs) != len(gots):
        return Comparison(False, "structure", f"{len(gots)} outputs, the reference has {len(refs)}")
    for index, (r, g) in enumerate(zip(refs, gots)):
        result = _compare_one(r, g, tolerances)
        if not result.ok:
            if len(refs) > 1:
                result.detail = f"output {index}: {result.detail}"
            return result
    return Comparison(True)


def _compare_one(reference: Any, got: Any, tolerances: Any) -> Comparison:
    import torch

    if not is_packed(reference):
        same = reference == got
        return Comparison(same, "values", "" if same else f"got {got!r}, expected {reference!r}")
    if not is_packed(got):
        return Comparison(False, "structure", "not a tensor")
    if list(reference["shape"]) != list(got["shape"]):
        return Comparison(False, "shape", f"shape {got['shape']} instead of {reference['shape']}",
                          {"got_shape": got["shape"], "want_shape": reference["shape"]})
    ref, out = unpack(reference), unpack(got)
    atol, rtol = tolerances(reference["dtype"])
    if ref.is_complex() or out.is_complex() or not (ref.is_floating_point() or out.is_floating_point()):
        equal = torch.equal(ref, out.to(ref.dtype))
        return Comparison(equal, "values", "" if equal else "integer values differ")
    ref64, out64 = ref.double(), out.double()
    bad_nan = ~torch.isfinite(out64) & torch.isfinite(ref64)
    if bool(bad_nan.any()):
        count = int(bad_nan.sum())
        return Comparison(False, "nan", f"{count} of {out64.numel()} values are NaN/Inf where the reference is finite",
                          {"nonfinite": count, "numel": out64.numel()})
    finite = torch.isfinite(ref64)
    diff = (out64 - ref64).abs()
    allowed = atol + rtol * ref64.abs()
    wrong = finite & (diff > allowed) | (~finite & ~((out64 == ref64) | (out64.isnan() & ref64.isnan())))
    if bool(wrong.any()):
        count = int(wrong.sum())
        worst = float(diff[finite].max()) if bool(finite.any()) else float("nan")
        return Comparison(False, "values",
                          f"{count} of {out64.numel()} values off by more than atol={atol:g}, rtol={rtol:g} "
                          f"(max abs error {worst:.3g})",
                          {"mismatched": count, "numel": out64.numel(), "max_abs_error": worst,
                           "atol": atol, "rtol": rtol})
    return Comparison(True)


def error_ratio(reference: Any, reference64: Any, got: Any, max_numel: int = 1 << 26) -> Optional[dict[str, Any]]:
    """The error budget: the submission's RMS error against a float64 reference, over the RMS
    error of the honest computation in the reference's own dtype (floored at that dtype's
    epsilon times the output's RMS, so an exact reference does not make every ratio infinite).
    None when it does not apply (not floating, shapes differ, too large, no float64 reference)."""
    import torch

    if not (is_packed(reference) and is_packed(reference64) and is_packed(got)):
        return None
    if list(reference["shape"]) != list(got["shape"]) or list(reference64["shape"]) != list(got["shape"]):
        return None
    ref, ref64, out = unpack(reference), unpack(reference64), unpack(got)
    if not ref.is_floating_point() or not out.is_floating_point() or ref.numel() == 0 or ref.numel() > max_numel:
        return None
    ref64 = ref64.double()
    finite = torch.isfinite(ref64) & torch.isfinite(ref.double()) & torch.isfinite(out.double())
    if not bool(finite.any()):
        return None
    exact = ref64[finite]
    scale = float(exact.pow(2).mean().sqrt())
    honest = float((ref.double()[finite] - exact).pow(2).mean().sqrt())
    error = float((out.double()[finite] - exact).pow(2).mean().sqrt())
    floor = torch.finfo(ref.dtype).eps * max(scale, 1e-30)
    return {"ratio": error / max(honest, floor), "error": error, "honest": honest, "floor": floor,
            "dtype": reference["dtype"]}
