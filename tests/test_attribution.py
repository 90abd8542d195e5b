"""Work attribution, the error budget and stage status, in process: real torch, real tensors.
The end-to-end fixtures (runtime_* in fixtures/manifest/behaviour.toml) run in test_fixtures."""

from pathlib import Path

import pytest
import torch

import gatekeeper
from gatekeeper.behaviour.attribution import Recorder
from gatekeeper.behaviour.compare import error_ratio
from gatekeeper.behaviour.work import judge, judge_call, kernel_class, own_kernel_names
from gatekeeper.sandbox.tensors import pack

pytestmark = pytest.mark.slow  # runs submissions in the sandbox

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def _record(fn):
    with Recorder("cpu") as recorder:
        out = fn()
    return recorder.summary(out, 0.0)


def test_torch_hidden_behind_a_computed_getattr_is_recorded_and_judged():
    a = torch.randn(32, 32)
    call = _record(lambda: getattr(torch, "".join(["mat", "mul"]))(a, a).relu())
    names = {op["name"] for op in call["ops"] if not op["glue"]}
    assert {"aten::mm", "aten::relu"} <= names
    verdict = judge_call(call, {})
    assert verdict is not None and "no function or kernel of the submission's own ran" in verdict[0]


def test_glue_only_call_is_not_torch_doing_the_work():
    a = torch.randn(8, 8)
    call = _record(lambda: a.t().contiguous().view(-1))
    assert all(op["glue"] for op in call["ops"])
    assert judge_call(call, {}) is None


def test_kernel_names_classified_own_vendor_torch():
    own = own_kernel_names("__global__ void my_gemm_kernel(float* a) {}\n@triton.jit\ndef fused_add(x):\n    pass\n")
    assert own == {"my_gemm_kernel", "fused_add"}
    assert kernel_class("my_gemm_kernel(float*, int)", own) == "own"
    assert kernel_class("fused_add", own) == "own"
    assert kernel_class("sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n", own) == "vendor"
    assert kernel_class("nvjet_tst_128x64_64x4_1x2_h_bz_TNT", own) == "vendor"
    assert kernel_class("void at::native::reduce_kernel<512, 1>(float*)", own) == "torch"
    assert kernel_class("triton_poi_fused_add_relu_0", own) == "torch"  # inductor: torch.compile did it
    assert kernel_class("Memcpy DtoD (Device -> Device)", own) == "glue"


def test_error_budget_separates_bf16_rounding_from_float32():
    torch.manual_seed(0)
    x, w = torch.randn(64, 128), torch.randn(128, 64) / 12
    exact = x.double() @ w.double()
    honest = x @ w
    rounded = honest.bfloat16().float()
    assert torch.allclose(rounded, exact.float(), atol=1e-2, rtol=1e-2)  # within tolerance
    fine = error_ratio(pack(honest), pack(exact), pack(x.flip(0).flip(0) @ w))
    coarse = error_ratio(pack(honest), pack(exact), pack(rounded))
    assert fine is not None and coarse is not None
    assert fine["ratio"] < 10 and coarse["ratio"] > 1000


def test_timing_after_a_reject_is_skipped_with_the_reason_not_an_error():
    report = gatekeeper.check(FIXTURES / "submissions" / "cpu_honest_python.py", FIXTURES / "problems" / "cpu_mean.py",
                              stages="static", keep_going=True, time=True)
    timing = next(s for s in report.stages if s.name.value == "timing")
    assert report.verdict.value == "reject"
    assert timing.status.value == "skipped" and "static stage rejected" in timing.reason


def test_strict_matches_torch_ops_to_the_reference_by_family():
    from gatekeeper.behaviour.work import op_family

    assert op_family("aten::mm") == op_family("aten::addmm") == op_family("aten::linear")
    assert op_family("aten::relu_") == op_family("aten::relu.default") == "relu"
    assert op_family("aten::add.Tensor") != op_family("aten::mm")


@torch.library.custom_op("gkattr::own_gemm", mutates_args=())
def _own_gemm(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Stands for the submission's own contraction: a custom operator is classed `own`."""
    return x @ w.t()


@torch.library.custom_op("gkattr::own_scale", mutates_args=())
def _own_scale(x: torch.Tensor) -> torch.Tensor:
    """Stands for a fig-leaf own kernel: elementwise only."""
    return x * 1.0


_ANY_SHARE = {"torch_output_max_own_share": 1.01}  # judge the producer whatever the measured shares


def test_a_torch_epilogue_after_the_own_contraction_is_not_torch_doing_the_work():
    # The own GEMM, then torch.relu writes the returned tensor (an H100 run rejected this
    # on one jittered shape, where the ReLU took 22.5% of the time).
    x, w = torch.randn(64, 32), torch.randn(16, 32)
    call = _record(lambda: torch.relu(_own_gemm(x, w)))
    assert call["producer"]["by"] == "torch" and call["producer"]["op"].startswith("aten::relu")
    assert judge_call(call, _ANY_SHARE, reference_ops=["aten::addmm", "aten::relu"]) is None


def test_torch_writing_the_output_is_the_work_when_the_reference_has_no_contraction():
    # An elementwise problem: torch's ReLU is the whole work, whatever ran before it.
    x, w = torch.randn(64, 32), torch.randn(16, 32)
    call = _record(lambda: torch.relu(_own_gemm(x, w)))
    verdict = judge_call(call, _ANY_SHARE, reference_ops=["aten::relu"])
    assert verdict is not None and "torch computed the returned tensor outside the own code" in verdict[0]


def test_own_kernel_names_never_claim_a_library_namespace_or_cublas_cutlass():
    # A fig-leaf named like torch's reduction does not make torch's kernel its own; an own
    # kernel of that name at global or an anonymous/own namespace stays own.
    own = own_kernel_names("__global__ void reduce_kernel(const float* x, float* y) {}\n// built on cutlass")
    assert kernel_class("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float> >"
                        "(at::native::ReduceOp<float>)", own) == "torch"
    assert kernel_class("void c10::cuda::reduce_kernel(float*)", own) == "torch"
    assert kernel_class("reduce_kernel(float const*, float*)", own) == "own"
    assert kernel_class("void (anonymous namespace)::reduce_kernel<128>(float*)", own) == "own"
    assert kernel_class("void mykern::reduce_kernel<4>(float*)", own) == "own"
    # "cutlass" in the source claims CUTLASS's own types, not cuBLAS's generated operators
    assert kernel_class("void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_128x128_16x4_nn_align4>"
                        "(cutlass_80_tensorop_s1688gemm_128x128_16x4_nn_align4::Params)", own) == "vendor"
    assert kernel_class("void cutlass::Kernel2<cutlass::gemm::kernel::GemmUniversal<float> >"
                        "(cutlass::gemm::kernel::GemmUniversal<float>::Params)", own) == "own"
    assert kernel_class("sgemm_largek_lds64", own) == "vendor"  # a classic cuBLAS kernel (H100, 2026-12-05)


def test_a_fig_leaf_own_kernel_before_torch_contraction_is_still_torch_doing_the_work():
    x, w = torch.randn(64, 32), torch.randn(16, 32)
    call = _record(lambda: torch.relu(torch.nn.functional.linear(_own_scale(x), w)))
    verdict = judge_call(call, _ANY_SHARE, reference_ops=["aten::addmm", "aten::relu"])
    assert verdict is not None and "torch computed the returned tensor" in verdict[0]


@torch.library.custom_op("gkattr::own_double", mutates_args=())
def _own_double(x: torch.Tensor) -> torch.Tensor:
    """Stands for an own epilogue that changes every value."""
    return x * 2.0


_NO_FLOOR = {"min_own_share": 0.0, "torch_output_max_own_share": 0.0}  # judge only what the fig-leaf check adds


def test_values_torch_computed_and_own_code_handed_back_are_a_fig_leaf_on_every_call():
    x = torch.randn(4, 16, 48)
    call = _record(lambda: _own_scale(torch.mean(x, 0)))  # own code copies torch's mean, value for value
    assert call["result_from_torch"] is not None and call["result_from_torch"].startswith("aten::mean")
    work, found = judge({"nominal": call, "jitter": call}, ["aten::mean.dim"], "default", _NO_FLOOR, None)
    assert work["torch_did_the_work"] and "holds exactly the values torch's aten::mean" in found[0].message


def test_an_epilogue_or_a_one_call_self_test_is_not_a_fig_leaf():
    x = torch.randn(4, 16, 48)
    epilogue = _record(lambda: _own_double(torch.mean(x, 0)))
    assert epilogue["result_from_torch"] == ""  # compared, and not torch's
    copied = _record(lambda: _own_scale(torch.mean(x, 0)))
    for calls in ({"nominal": epilogue, "jitter": epilogue}, {"nominal": copied, "jitter": epilogue}):
        work, found = judge(calls, ["aten::mean.dim"], "default", _NO_FLOOR, None)
        assert not work["torch_did_the_work"], [f.message for f in found]


def test_an_op_the_problem_forbids_is_found_by_family_whatever_reached_it():
    from gatekeeper.behaviour.work import forbidden_op

    x, w = torch.randn(8, 16), torch.randn(4, 16)
    call = _record(lambda: torch.nn.functional.__dict__["linear"](x, w).relu())
    hit = forbidden_op(call, ("torch.nn.functional.linear",))
    assert hit is not None and hit[1] == "torch.nn.functional.linear" and "mm" in hit[0]
    assert forbidden_op(call, ("cublas*",)) is None and forbidden_op(call, ("torch.nn.Conv2d",)) is None
    assert forbidden_op(_record(lambda: x.relu()), ("torch.nn.functional.linear",)) is None


def test_a_constant_result_is_no_evidence_of_a_copy():
    x = torch.zeros(4, 16, 48)
    call = _record(lambda: _own_scale(torch.mean(x, 0)))  # all zeros on both sides
    assert call["result_from_torch"] is None


def test_a_forbidden_op_run_once_as_a_self_test_is_not_the_work():
    x, w = torch.randn(8, 16), torch.randn(4, 16)
    with_torch = _record(lambda: _own_scale(torch.nn.functional.linear(x, w)))
    without = _record(lambda: _own_double(x))
    forbidden = ("torch.nn.functional.linear",)
    work, found = judge({"nominal": with_torch, "jitter": without}, ["aten::addmm"], "default", _NO_FLOOR, None,
                        forbidden=forbidden)
    assert not any("forbids" in f.message for f in found), [f.message for f in found]
    work, found = judge({"nominal": with_torch, "jitter": with_torch}, ["aten::addmm"], "default", _NO_FLOOR, None,
                        forbidden=forbidden)
    assert any("forbids `torch.nn.functional.linear`" in f.message for f in found), [f.message for f in found]


def test_calls_with_nothing_to_compare_do_not_clear_a_fig_leaf():
    # seeds that scheduled a constant or a NaN input: those calls' results say nothing, and the
    # fig-leaf was missed on them (rt4_fig_leaf_passthrough_table, 2 seeds of 4)
    x = torch.randn(4, 16, 48)
    copied = _record(lambda: _own_scale(torch.mean(x, 0)))
    constant = _record(lambda: _own_scale(torch.mean(torch.zeros(4, 16, 48), 0)))
    poisoned = x.clone()
    poisoned[0, 0, 0] = float("nan")
    with_nan = _record(lambda: _own_scale(torch.mean(poisoned, 0)))
    assert constant["result_from_torch"] is None and with_nan["result_from_torch"].startswith("aten::mean")
    work, found = judge({"nominal": copied, "zeros": constant, "nan": with_nan}, ["aten::mean.dim"], "default",
                        _NO_FLOOR, None)
    assert work["torch_did_the_work"], [f.message for f in found]
    # one comparable call alone is not every call
    work, found = judge({"nominal": copied, "zeros": constant}, ["aten::mean.dim"], "default", _NO_FLOOR, None)
    assert not work["torch_did_the_work"]
