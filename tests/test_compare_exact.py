"""behaviour.compare settles wrong float32 pieces mostly in float32 (issue 21 item 12): its
verdict, mismatch count and max abs error must equal the plain float64 computation's on every
piece, including values at the tolerance's edge, subnormals, NaN/Inf and half precision."""

from __future__ import annotations

import pytest
import torch

from gatekeeper.behaviour import chunks as chunks_module
from gatekeeper.behaviour.compare import compare
from gatekeeper.sandbox.tensors import pack


def _float64_oracle(ref: torch.Tensor, got: torch.Tensor, atol: float, rtol: float) -> tuple[int, int, float]:
    """(nonfinite, mismatched, max abs error) as the comparison defines them, all in float64."""
    r, o = ref.double().reshape(-1), got.double().reshape(-1)
    diff = (o - r).abs()
    finite = torch.isfinite(r)
    nonfinite = int((~torch.isfinite(o) & finite).sum())
    wrong = finite & (diff > atol + rtol * r.abs()) | (~finite & ~((o == r) | (o.isnan() & r.isnan())))
    worst = float(diff[finite].max()) if bool(finite.any()) else float("nan")
    return nonfinite, int(wrong.sum()), worst


def _edge_case_values(n: int, atol: float, rtol: float, dtype: torch.dtype,
                      generator: torch.Generator) -> tuple[torch.Tensor, ...]:
    """A reference and an output (in `dtype`) whose differences sit on, just inside and just
    outside the tolerance, far outside it, and at the dtype's extremes."""
    info = torch.finfo(dtype)
    span = 6 if dtype != torch.float16 else 3
    ref = torch.randn(n, generator=generator) * torch.logspace(-span, span, n)[torch.randperm(n, generator=generator)]
    ref = ref.to(dtype).float()
    tol = atol + rtol * ref.double().abs()
    step = torch.randint(0, 6, (n,), generator=generator)
    scale = torch.tensor([0.0, 1.0 - 1e-7, 1.0, 1.0 + 1e-7, 3.0, 1e6], dtype=torch.float64)[step]
    sign = torch.where(torch.rand(n, generator=generator) < 0.5, -1.0, 1.0).double()
    got = (ref.double() + sign * scale * tol).clamp(-info.max, info.max).to(dtype)
    ref = ref.to(dtype)
    # Subnormal and near-largest references; the last difference is beyond the dtype's range.
    ref[:4] = torch.tensor([info.smallest_normal / 4, -info.smallest_normal / 8, info.max * 0.9, -info.max * 0.9])
    got[:4] = torch.tensor([0.0, info.smallest_normal / 8, info.max, info.max * 0.9])
    return ref, got


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("atol,rtol", [(1e-2, 1e-2), (1e-5, 1e-3), (0.0, 1e-2), (1e-3, 0.0)])
def test_a_wrong_output_is_counted_exactly_as_in_float64(monkeypatch, dtype, atol, rtol):
    monkeypatch.setattr(chunks_module, "CHUNK_ELEMENTS", 1 << 12)  # many pieces, each settled on its own
    generator = torch.Generator().manual_seed(21)
    ref, got = _edge_case_values(5 * (1 << 12) + 7, atol, rtol, dtype, generator)
    assert bool(torch.isfinite(ref).all() and torch.isfinite(got).all())
    _, mismatched, worst = _float64_oracle(ref, got, atol, rtol)
    result = compare(pack(ref), pack(got), lambda _: (atol, rtol))
    assert mismatched > 0 and not result.ok and result.reason == "values"
    assert result.evidence["mismatched"] == mismatched
    assert result.evidence["max_abs_error"] == worst


@pytest.mark.parametrize("poison", [float("nan"), float("inf")])
def test_a_non_finite_output_is_still_the_nan_verdict(monkeypatch, poison):
    monkeypatch.setattr(chunks_module, "CHUNK_ELEMENTS", 1 << 10)
    ref = torch.randn(4096, generator=torch.Generator().manual_seed(5))
    got = ref.clone()
    got[::3] += 1.0  # wrong in every piece, so pieces before the poisoned one take the float32 path
    got[3000] = poison
    nonfinite, _, _ = _float64_oracle(ref, got, 1e-2, 1e-2)
    result = compare(pack(ref), pack(got), lambda _: (1e-2, 1e-2))
    assert result.reason == "nan" and result.evidence["nonfinite"] == nonfinite == 1


def test_a_correct_output_still_passes():
    ref = torch.randn(10000, generator=torch.Generator().manual_seed(7))
    assert compare(pack(ref), pack(ref * (1 + 1e-4)), lambda _: (1e-2, 1e-2)).ok
