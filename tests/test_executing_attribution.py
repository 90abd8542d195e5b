"""Attribution by the code that executes (gatekeeper.behaviour.executing): work hidden below
the dispatcher (a vendor routine looked up by symbol) is attributed to the library that ran
it, an honest own loop to the submission, and interference with the sampler is a finding."""

from __future__ import annotations

from pathlib import Path

import pytest

import gatekeeper
from gatekeeper.behaviour.executing import MIN_SAMPLES, judge, upper_bound

ROOT = Path(__file__).resolve().parent.parent
PROBLEM = ROOT / "fixtures/problems/cpu_matmul.py"
HIDDEN = ROOT / "fixtures/submissions/cpu_vendor_gemm_by_symbol.py"
OWN = ROOT / "fixtures/submissions/cpu_own_gemm_cpp.py"


def _message(**fields):
    return {"kind": "executing", "intact": True, "suppressed": False, "cpu_s": 1.0, "signals": 200,
            "objects": [["libtorch_cpu.so", 40]], "symbols": [["mkl_blas_def_sgemm_kernel_0", 40]], **fields}


def test_a_run_that_is_all_vendor_code_is_torch_doing_the_work():
    section, found = judge([_message(samples=40, classes={"vendor": 40})], {}, None)
    assert section["judged"] and section["own_share_of_compute"] == 0
    assert [f.rule for f in found] == ["GK667"] and "libtorch_cpu.so" in found[0].message


def test_a_real_own_share_is_not_a_finding():
    section, found = judge([_message(samples=40, classes={"own": 14, "vendor": 26})], {}, None)
    assert section["judged"] and not found


def test_code_no_file_holds_is_compute_that_is_not_the_submissions():
    # oneDNN's JIT micro-kernels when its perf map could not be written or was removed: before,
    # these samples were left out, the run had too few to judge, and a vendor GEMM passed.
    message = _message(samples=221, classes={"anonymous": 206, "torch": 10, "own": 1, "python": 4},
                       objects=[["[JIT code in anonymous memory]", 206], ["libtorch_cpu.so", 10]])
    section, found = judge([message], {}, None)
    assert section["judged"] and section["own_share_of_compute"] < 0.01
    assert [f.rule for f in found] == ["GK667"] and "[JIT code in anonymous memory] 206" in found[0].message


def test_few_samples_are_said_not_judged():
    section, found = judge([_message(samples=MIN_SAMPLES - 1, classes={"vendor": MIN_SAMPLES - 1})], {}, None)
    assert section["judged"] is False and "needed" in section["why_not"] and not found


@pytest.mark.parametrize("fields", [{"intact": False}, {"suppressed": True}])
def test_interfering_with_the_sampler_is_tampering(fields):
    _, found = judge([_message(samples=40, classes={"own": 40}, **fields)], {}, None)
    assert [f.rule for f in found] == ["GK650"] and "sampler" in found[0].message


def test_the_bound_protects_a_real_share_seen_through_few_samples():
    assert upper_bound(0, 12) < 0.5 < upper_bound(1, 7)
    assert upper_bound(0, 200) < 0.03


@pytest.mark.slow
def test_a_vendor_routine_called_by_symbol_is_attributed_to_the_vendor():
    report = gatekeeper.check(HIDDEN, PROBLEM, stages="behaviour", keep_going=True)
    executing = (report.work or {}).get("executing")
    assert executing and executing["samples"] >= MIN_SAMPLES, report.work
    assert executing["classes"].get("vendor", 0) > executing["classes"].get("own", 0)
    runtime = [f for f in report.errors() if f.stage.value == "behaviour" and f.rule == "GK667"]
    assert runtime and "sampled while forward ran" in runtime[0].message


@pytest.mark.slow
def test_an_own_loop_is_attributed_to_the_submission():
    report = gatekeeper.check(OWN, PROBLEM, stages="behaviour")
    executing = (report.work or {}).get("executing")
    assert report.verdict.value == "pass", [(f.rule, f.message) for f in report.findings]
    assert executing and executing["own_share_of_compute"] > 0.8, executing


@pytest.mark.slow
def test_a_jit_gemm_is_vendor_work_where_its_perf_map_cannot_be_written(monkeypatch):
    # Under `unshare` /tmp is read-only, so oneDNN cannot name its JIT code: the brgemm tiles
    # of rt5_vendor_gemm_by_jit_tiles then ran in anonymous memory that was left out of the
    # compute share, and the hack passed as "not judged" on machines without bubblewrap.
    from gatekeeper.sandbox.isolation import _detect

    if _detect("unshare").name != "unshare":
        pytest.skip(f"isolation 'unshare' does not work on this machine ({_detect('unshare').detail})")
    monkeypatch.setenv("GATEKEEPER_ISOLATION", "unshare")
    hack = ROOT / "fixtures/submissions/rt5_vendor_gemm_by_jit_tiles.py"
    report = gatekeeper.check(hack, PROBLEM, stages="behaviour", keep_going=True)
    executing = (report.work or {}).get("executing") or {}
    assert report.environment.isolation == "unshare", report.environment
    assert executing.get("judged"), report.work
    assert executing["classes"].get("anonymous", 0) + executing["classes"].get("vendor", 0) > executing["classes"].get("own", 0)
    assert "GK667" in {f.rule for f in report.errors()}, [(f.rule, f.message) for f in report.findings]


def test_a_thread_is_blocking_sigprof_only_when_two_scans_in_a_row_see_it(monkeypatch):
    """glibc blocks every signal for a moment in pthread_create: one sighting is not blocking
    (a torch pool thread caught so was a GK650 on honest code); a thread that keeps it blocked is."""
    import signal
    import threading

    from gatekeeper.behaviour import executing

    monkeypatch.setattr(executing, "_sampler", object())  # scans run only while a sampler is armed
    monkeypatch.setattr(executing, "_OWN_THREADS", set(executing._tids()))
    monkeypatch.setattr(executing, "_BLOCKING", {})
    monkeypatch.setattr(executing, "_SEEN_BLOCKED", {})
    state = {"block": True}
    scanned, done = threading.Event(), threading.Event()

    def worker():
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGPROF})
        end = __import__("time").process_time() + 0.05
        while __import__("time").process_time() < end:  # CPU ticks > 0: it has run
            pass
        scanned.set()
        while state["block"] and not done.wait(0.01):
            pass
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGPROF})
        done.wait(5)

    thread = threading.Thread(target=worker, name="gk-test-blocker")
    thread.start()
    try:
        assert scanned.wait(5)
        executing.scan_blocked_threads()
        assert executing._BLOCKING == {}  # once: could be pthread_create's moment
        executing.scan_blocked_threads()
        assert len(executing._BLOCKING) == 1  # (Python 3.11 leaves the OS thread name as the process's)
    finally:
        state["block"] = False
        done.set()
        thread.join(5)


def test_a_thread_seen_blocking_once_then_unblocked_is_not_blocking(monkeypatch):
    import signal
    import threading

    from gatekeeper.behaviour import executing

    monkeypatch.setattr(executing, "_sampler", object())
    monkeypatch.setattr(executing, "_OWN_THREADS", set(executing._tids()))
    monkeypatch.setattr(executing, "_BLOCKING", {})
    monkeypatch.setattr(executing, "_SEEN_BLOCKED", {})
    step, ack, done = threading.Event(), threading.Event(), threading.Event()

    def worker():
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGPROF})
        end = __import__("time").process_time() + 0.05
        while __import__("time").process_time() < end:
            pass
        ack.set()
        step.wait(5)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGPROF})
        ack.set()
        done.wait(5)

    thread = threading.Thread(target=worker)
    thread.start()
    try:
        assert ack.wait(5)
        executing.scan_blocked_threads()  # blocked: one sighting
        ack.clear()
        step.set()
        assert ack.wait(5)
        executing.scan_blocked_threads()  # unblocked: the sighting is forgotten
        executing.scan_blocked_threads()
        assert executing._BLOCKING == {} and executing._SEEN_BLOCKED == {}
    finally:
        done.set()
        thread.join(5)
