"""Value trials judged fairly (issue 22 item 4): a scheduled call outside the fixed atol is
judged against a float64 reference, next to the honest computation's error at the same
scale. Real torch; the end-to-end pair runs in tests/test_fixtures.py (value_*_gemm_cpp)."""

from __future__ import annotations

import torch

from gatekeeper.behaviour.compare import FAIR_SLACK, compare, fair_compare
from gatekeeper.sandbox.tensors import pack


def _tol(_dtype):
    return 1e-2, 1e-2


def _gemm(seed: int, scale: float):
    g = torch.Generator().manual_seed(seed)
    a, b = torch.randn(256, 1024, generator=g) * scale, torch.randn(1024, 256, generator=g) * scale
    return a, b, a @ b, a.double() @ b.double()


def _sequential(a, b):
    """fp32 GEMM in another order (k outermost, sequential accumulation): an honest kernel."""
    acc = torch.zeros(a.shape[0], b.shape[1])
    for k in range(a.shape[1]):
        acc += a[:, k:k + 1] * b[k:k + 1, :]
    return acc


def test_an_honest_gemm_on_scaled_inputs_fails_the_fixed_atol_but_passes_the_fair_judgment():
    outside_atol = 0
    for seed in range(3):
        a, b, ref, ref64 = _gemm(seed, 1000.0)
        honest = _sequential(a, b)
        outside_atol += not compare(pack(ref), pack(honest), _tol).ok
        result = fair_compare(pack(ref), pack(ref64), pack(honest), _tol)
        assert result.ok, result.detail
        assert result.evidence["max_abs_error_vs_float64"] <= FAIR_SLACK * result.evidence["honest_max_abs_error"]
    assert outside_atol >= 2  # the old judgment rejected it (issue 22: 13 of 19 runs)


def test_value_sniffing_shortcuts_are_still_caught():
    a, b, ref, ref64 = _gemm(7, 1000.0)
    low = (a.half().float() @ b.half().float())  # a half-precision path taken on large values
    clamped = a.clamp(-8, 8) @ b.clamp(-8, 8)  # assumes the benchmark's value range
    stale = ref.clone()
    stale[3, 5] += 0.01 * ref.abs().max()  # one element off by 1% of the range
    for got in (low, clamped, stale):
        assert not fair_compare(pack(ref), pack(ref64), pack(got), _tol).ok


def test_nan_where_float64_is_finite_is_still_nan_and_honest_overflow_is_matched():
    x = torch.tensor([1e38, 3e38, 1.0, -2.0])
    ref, ref64 = x * 10, x.double() * 10  # fp32 overflows where float64 does not
    assert fair_compare(pack(ref), pack(ref64), pack(ref.clone()), _tol).ok
    wrong = ref.clone()
    wrong[2] = float("nan")
    result = fair_compare(pack(ref), pack(ref64), pack(wrong), _tol)
    assert not result.ok and result.reason == "nan"


def _masked_oracle(ref, ref64, got, atol, rtol):
    """The judgment's sums in float64, always through the mask of finite reference values
    (what fair_compare computed before its all-finite shortcut)."""
    r, e, o = ref.double().reshape(-1), ref64.double().reshape(-1), got.double().reshape(-1)
    finite = torch.isfinite(e) & torch.isfinite(r)
    nonfinite = int((~torch.isfinite(o) & finite).sum())
    inf_mismatch = int((~torch.isfinite(r) & ~((o == r) | (o.isnan() & r.isnan()))).sum())
    honest = excess = worst = 0.0
    if bool(finite.any()):
        e, r, o = e[finite], r[finite], o[finite]
        honest = float((r - e).abs().max())
        diff = (o - e).abs()
        worst = max(0.0, float(diff.max()))
        excess = max(0.0, float((diff - e.abs() * rtol).max()) - atol)
    return nonfinite, inf_mismatch, honest, worst, excess


def test_the_all_finite_shortcut_sums_what_the_masked_judgment_sums():
    g = torch.Generator().manual_seed(3)
    x = torch.randn(4096, generator=g) * 1e3
    ref64 = x.double() * 3.0
    ref = (x * 3.0)
    cases = {
        "honest": ref.clone(),
        "off": ref + 0.5,
        "nan and inf in the output": ref.clone().index_put_((torch.tensor([7, 99]),), torch.tensor([float("nan"), float("inf")])),
    }
    overflow = ref.clone()
    overflow[5] = float("inf")  # the reference in its own dtype overflowed here: the masked path
    for name, got in cases.items():
        for reference in (ref, overflow):
            result = fair_compare(pack(reference), pack(ref64), pack(got), _tol)
            nonfinite, inf_mismatch, honest, worst, excess = _masked_oracle(reference, ref64, got, *_tol(None))
            ev = result.evidence
            assert ev.get("nonfinite", 0) == nonfinite, (name, ev)
            assert ev["honest_max_abs_error"] == honest and ev["max_abs_error_vs_float64"] == worst, (name, ev)
            if result.reason == "values":
                assert ev["excess"] == excess and ev["inf_mismatch"] == inf_mismatch, (name, ev)
            assert result.ok == (not nonfinite and not inf_mismatch and excess <= FAIR_SLACK * honest), (name, ev)


def test_judging_leaves_the_float64_reference_as_it_was(tmp_path, monkeypatch):
    # A large reference arrives as a mapped transfer file, and its pieces are views of that
    # mapping: a judgment that changed one in place would change what the next one reads.
    from gatekeeper.sandbox import spill

    monkeypatch.setenv(spill.DIR_ENV, str(tmp_path))
    monkeypatch.setenv(spill.BYTES_ENV, "1024")
    x = torch.linspace(-50.0, 50.0, 4096)
    packed64 = spill.adopt_tree(pack(x.double() * 3.0), str(tmp_path))
    monkeypatch.delenv(spill.DIR_ENV)  # the other tensors travel inline
    assert isinstance(packed64["data"], spill.FileData)  # the mapped path, not inline bytes
    wrong = x * 3.0 + 1.0
    result = fair_compare(pack(x * 3.0), packed64, pack(wrong), _tol)
    assert not result.ok
    again = fair_compare(pack(x * 3.0), packed64, pack(wrong), _tol)
    assert again.evidence == result.evidence  # the second judgment read the same reference
    assert torch.equal(packed64["data"].tensor(torch.float64), x.double() * 3.0)
