"""The float64 reference of the error budget and the fair value judgment stays float64 where
the reference's forward casts to float32 or bf16 itself (behaviour/wide_mode.py). Without
it, a bf16 problem's "float64" output was the native output, the honest error 0, and honest
solutions failed on scaled inputs (GPU round 18, GK673 on two r12 honest GEMMs). Real torch."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from gatekeeper.behaviour.compare import fair_compare
from gatekeeper.behaviour.reference_job import wider_reference
from gatekeeper.behaviour.schedule_ref import _Wide
from gatekeeper.behaviour.wide_mode import widened
from gatekeeper.sandbox.tensors import pack


class PinnedPrecision(nn.Module):
    """As KernelBench-Hard's w4a16 reference: int4 weights times a bf16 scale, float32 inside,
    bf16 out."""

    def __init__(self) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.register_buffer("q", torch.randint(-8, 8, (256, 1024), generator=g, dtype=torch.int8))
        self.register_buffer("scale", (torch.rand(256, 1, generator=g) * 0.02 + 0.001).to(torch.bfloat16))

    def forward(self, x):
        w = self.q.float() * self.scale.float()
        return (x.float() @ w.t()).to(torch.bfloat16)


def _tol(_dtype):
    return 0.05, 0.02


def _scaled_input(seed: int, scale: float = 100.0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(64, 1024, generator=g) * scale).to(torch.bfloat16)


def _honest(model: PinnedPrecision, x: torch.Tensor) -> torch.Tensor:
    """Weights dequantised in bf16, as tensor-core kernels do, float32 sums, bf16 out."""
    w = model.q.to(torch.bfloat16) * model.scale
    return (x.float() @ w.float().t()).to(torch.bfloat16)


def test_double_alone_gives_back_the_native_values_and_the_mode_widens_them():
    model, x = PinnedPrecision(), _scaled_input(1)
    native = model(x)
    wide_model, wide_x = PinnedPrecision().double(), x.double()
    with torch.no_grad():
        assert torch.equal(wide_model(wide_x).double(), native.double())  # the old "float64": no wider
        with widened():
            out64 = wide_model(wide_x)
    assert out64.dtype == torch.float64
    exact = wide_x @ (wide_model.q.double() * wide_model.scale).t()
    assert torch.allclose(out64, exact, rtol=1e-12, atol=1e-9)
    assert not torch.equal(out64, native.double())


def test_an_honest_solution_passes_the_fair_judgment_against_the_widened_reference():
    failed_before = 0
    for seed in range(3):
        model, x = PinnedPrecision(), _scaled_input(seed, 10.0 ** (seed + 1))
        with torch.no_grad():
            native, honest = model(x), _honest(model, x)
        out = wider_reference(model, [x], native, "cpu")
        assert "output64" in out, out
        result = fair_compare(pack(native), out["output64"], pack(honest), _tol)
        assert result.ok, result.detail
        assert result.evidence["honest_max_abs_error"] > 0
        old64 = pack(PinnedPrecision().double()(x.double()).double())
        failed_before += not fair_compare(pack(native), old64, pack(honest), _tol).ok
    assert failed_before == 3  # what the GPU round saw


def test_shortcuts_still_fail_against_the_widened_reference():
    model, x = PinnedPrecision(), _scaled_input(4)
    with torch.no_grad():
        native = model(x)
        w = model.q.float() * model.scale.float()
        dropped = (x.float()[:, :768] @ w[:, :768].t()).to(torch.bfloat16)  # a quarter of K skipped
        clamped = (x.float().clamp(-8, 8) @ w.t()).to(torch.bfloat16)  # the benchmark's value range assumed
    wide = _Wide(model)([x], native)
    assert wide is not None
    # (A lower precision throughout, fp8 activations say, fails the plain tolerance on the
    # benchmark-like calls; on a scaled call the fair slack, 16x the bf16 rounding of the
    # largest values, is coarser than that.)
    for got in (dropped, clamped):
        assert not fair_compare(pack(native), pack(wide), pack(got), _tol).ok


def test_quantisation_and_bit_views_are_left_as_written():
    x = torch.tensor([0.3, 1.7, -2.2, 448.5], dtype=torch.float64)
    with widened():
        quantised = x.to(torch.float8_e4m3fn).float()
        bits = torch.tensor([1.0], dtype=torch.float32)
        made = torch.zeros(3, dtype=torch.bfloat16)
        half = torch.ones(2, dtype=torch.int64).half()
    assert torch.equal(quantised, x.to(torch.float8_e4m3fn).double())  # rounded to fp8, then widened
    assert bits.dtype == torch.float64
    with widened(), pytest.raises(TypeError, match="bit view"):
        bits.view(torch.int32)  # its bits are no longer float32's: the wide run stops
    assert int(torch.tensor([1.0]).view(torch.int32)) == 0x3F800000  # outside the mode, as ever
    assert made.dtype == torch.float64 and half.dtype == torch.float64
