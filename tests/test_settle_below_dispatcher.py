"""A C++-side torch-fallback suspicion (a call into ATen or a vendor library below the
dispatcher) is settled only by the check that can see there: the sampled attribution on the
CPU. The dispatcher recorder seeing no torch operator never clears it (red team: at::cpu::addmm_out
and cpublas::brgemm were cleared as 'own code 100%')."""

from gatekeeper.config import Config
from gatekeeper.report import (Category, Finding, ProbeLink, ProbeOutcome, Severity, StageName, StageResult,
                               StageStatus)
from gatekeeper.settle import settle


def _suspicion(cpp: bool) -> Finding:
    evidence = {"cpp_line": "at::cpu::addmm_out(y, b, x, w.t());", "call": "at::cpu::addmm_out"} if cpp else \
        {"call": "torch.addmm"}
    return Finding(rule="GK306", name="CallsAtenFromCpp", category=Category.TORCH_FALLBACK, severity=Severity.WARNING,
                   stage=StageName.STATIC, message="m", hint="h", evidence=evidence, confidence="likely",
                   confirmed_by="GK667", probe=ProbeLink(check="GK667", outcome=ProbeOutcome.UNCONFIRMED,
                                                         detail="held", static_severity=Severity.ERROR))


def _settled(cpp: bool, executing: dict) -> Finding:
    f = _suspicion(cpp)
    work = {"device": "cpu", "torch_did_the_work": False, "own_share_of_compute": 1.0, "executing": executing}
    stages = [StageResult(name=StageName.BEHAVIOUR, status=StageStatus.PASSED)]
    settle([f], stages, Config(), work)
    return f


def test_the_recorder_alone_never_clears_a_cpp_suspicion():
    f = _settled(True, {"judged": False, "samples": 10, "classes": {"own": 6, "vendor": 4}})
    assert f.probe.outcome == ProbeOutcome.UNCONFIRMED and f.severity == Severity.WARNING
    assert "too few samples" in f.probe.detail


def test_library_samples_confirm_a_cpp_suspicion_as_partial_work_and_own_samples_clear_it():
    partial = _settled(True, {"judged": True, "samples": 13, "classes": {"own": 6, "vendor": 6, "python": 1}})
    assert partial.probe.outcome == ProbeOutcome.CONFIRMED and partial.severity == Severity.WARNING
    own = _settled(True, {"judged": True, "samples": 96, "classes": {"own": 96}})
    assert own.probe.outcome == ProbeOutcome.CLEARED and own.severity == Severity.INFO


def test_a_python_side_suspicion_is_still_settled_by_the_recorder():
    f = _settled(False, {"judged": False, "samples": 3, "classes": {}})
    assert f.probe.outcome == ProbeOutcome.CLEARED


def _on_gpu(cpp: bool, own_s: float, vendor_s: float, situation: str = "reference_op") -> Finding:
    f = _suspicion(cpp)
    f.evidence["situation"] = situation
    total = own_s + vendor_s
    work = {"device": "cuda", "torch_did_the_work": False, "own_share_of_compute": own_s / total,
            "kernel_ownership": {"ownership": "launcher (CUPTI callbacks and kernel records)"},
            "classes": {"own": {"count": 16, "time_s": own_s, "share": own_s / total},
                        "torch": {"count": 0, "time_s": 0.0, "share": 0.0},
                        "vendor": {"count": 16, "time_s": vendor_s, "share": vendor_s / total},
                        "glue": {"count": 0, "time_s": 0.0, "share": 0.0}}}
    settle([f], [StageResult(name=StageName.BEHAVIOUR, status=StageStatus.PASSED)], Config(), work)
    return f


def test_on_a_gpu_vendor_kernels_confirm_a_suspicion_and_own_kernels_clear_it():
    # H100, 2026-12-07: `&cublasSgemm_v2` beside a one-tile own kernel, cuBLAS 95% of the time;
    # before, "cleared: own code did the work (own code 5%)"
    vendor = _on_gpu(True, own_s=0.0086, vendor_s=0.1648)
    assert vendor.probe.outcome == ProbeOutcome.CONFIRMED and vendor.severity == Severity.WARNING
    assert "95%" in vendor.probe.detail and "launcher" in vendor.probe.detail
    own = _on_gpu(True, own_s=0.1648, vendor_s=0.0020)
    assert own.probe.outcome == ProbeOutcome.CLEARED and own.severity == Severity.INFO
    python_side = _on_gpu(False, own_s=0.0086, vendor_s=0.1648)
    assert python_side.probe.outcome == ProbeOutcome.CONFIRMED


def test_a_whole_op_suspicion_confirmed_by_a_library_majority_is_an_error():
    """GK307 on `&cublasSgemm_v2` said cuBLAS does the reference's whole op and the own kernel
    none of it (it redoes one row tile): cuBLAS at 95% of the time confirms exactly that.
    A library share under half, or a suspicion of one op of several, stays partial work."""
    whole = _on_gpu(True, own_s=0.0086, vendor_s=0.1648, situation="torch_does_whole_op")
    assert whole.probe.outcome == ProbeOutcome.CONFIRMED and whole.severity == Severity.ERROR
    assert "whole op" in whole.probe.detail
    minority = _on_gpu(True, own_s=0.12, vendor_s=0.05, situation="torch_does_whole_op")
    assert minority.probe.outcome == ProbeOutcome.CONFIRMED and minority.severity == Severity.WARNING
    one_op = _on_gpu(True, own_s=0.0007, vendor_s=0.0598, situation="reference_op")  # at::cuda::mm + own triu
    assert one_op.severity == Severity.WARNING
    # the same on the CPU, by samples
    f = _suspicion(True)
    f.evidence["situation"] = "torch_does_whole_op"
    work = {"device": "cpu", "torch_did_the_work": False, "own_share_of_compute": 1.0,
            "executing": {"judged": True, "samples": 90, "classes": {"own": 10, "vendor": 80}}}
    settle([f], [StageResult(name=StageName.BEHAVIOUR, status=StageStatus.PASSED)], Config(), work)
    assert f.probe.outcome == ProbeOutcome.CONFIRMED and f.severity == Severity.ERROR


def test_on_the_cpu_a_python_side_suspicion_is_settled_by_the_recorder_s_timed_operators():
    # red team round 13: `Tensor.mm` fetched by name per row panel beside an own stitch loop,
    # aten::mm 93% of the recorder's compute time, was cleared as "own code did the work"
    def settled(own_s: float, torch_s: float, situation: str) -> Finding:
        f = _suspicion(False)
        f.evidence["situation"] = situation
        total = own_s + torch_s
        work = {"device": "cpu", "torch_did_the_work": False, "own_share_of_compute": own_s / total,
                "classes": {"own": {"count": 8, "time_s": own_s, "share": own_s / total},
                            "torch": {"count": 98, "time_s": torch_s, "share": torch_s / total},
                            "vendor": {"count": 0, "time_s": 0.0, "share": 0.0},
                            "glue": {"count": 0, "time_s": 0.0, "share": 0.0}}}
        settle([f], [StageResult(name=StageName.BEHAVIOUR, status=StageStatus.PASSED)], Config(), work)
        return f

    whole = settled(0.007, 0.093, "torch_does_whole_op")
    assert whole.probe.outcome == ProbeOutcome.CONFIRMED and whole.severity == Severity.ERROR
    assert "recorder" in whole.probe.detail
    part = settled(0.060, 0.040, "reference_op")
    assert part.probe.outcome == ProbeOutcome.CONFIRMED and part.severity == Severity.WARNING
    own = settled(0.099, 0.001, "torch_does_whole_op")
    assert own.probe.outcome == ProbeOutcome.CLEARED and own.severity == Severity.INFO
