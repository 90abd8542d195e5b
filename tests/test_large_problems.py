"""Large problems are really run (issue 22 item 1).

The trials message and the schedule message used to go out from two writer threads: the
small schedule message could be written first and close stdin, the large trials write then
failed silently, and a 32 MiB ReLU that returns x.clone() passed with 0 calls. Messages are
now written in order by one thread and acknowledged; a failed write or a missing call is an
infrastructure ERROR unless the submission's own failure explains it. Real workers, real
torch; the slow tests run the whole behaviour stage under load (one core kept busy)."""

from __future__ import annotations

from pathlib import Path

import pytest

import gatekeeper
from gatekeeper.behaviour import stage
from gatekeeper.behaviour.completeness import infrastructure_failure
from gatekeeper.problem.schedule import MIN_LARGE_CALLS
from gatekeeper.report import StageName
from gatekeeper.runtime.failures import worker_failure
from gatekeeper.sandbox import run_job
from gatekeeper.sandbox.runner import Job, JobResult

from large_problem_support import CpuBurner, write_relu_problem

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
CLONE = FIXTURES / "submissions" / "large_relu_clone.py"
TIMEOUTS = {"wait": 60}


def _feed_in_order(messages: list[dict]) -> JobResult:
    job = Job("gatekeeper.sandbox.selftest:receive_all", {}, timeouts=TIMEOUTS, default_timeout_s=60,
              keep_stdin=True)
    for number, message in enumerate(messages):
        job.feed(message, close=number == len(messages) - 1)
    return job.wait()


@pytest.mark.slow
def test_a_large_message_is_never_overtaken_by_a_small_one():
    # 40 MB first, then a few bytes: the order the worker sees is the order fed, under load.
    with CpuBurner():
        for _ in range(3):
            result = _feed_in_order([{"order": "trials", "data": b"\x01" * 40_000_000},
                                     {"order": "schedule", "data": b"\x02"}])
            assert result.status == "ok", result.detail
            assert [(m["order"], m["size"]) for m in result.of_kind("got")] == [("trials", 40_000_000),
                                                                              ("schedule", 1)]
            assert result.feed_problem() is None
            assert [m["seq"] for m in result.of_kind("fed-ack")] == [0, 1]


def test_a_message_the_worker_never_read_is_reported_not_swallowed():
    # run_code never receives: the fed message is written into a pipe nobody reads, or fails.
    job = Job("gatekeeper.sandbox.selftest:run_code", {"code": "result = 1"}, timeouts={"call": 60},
              default_timeout_s=60, keep_stdin=True)
    job.feed({"trials": [], "data": b"\x00" * 4_000_000})
    result = job.wait()
    assert result.status == "ok"
    problem = result.feed_problem()
    assert problem is not None and ("never acknowledged" in problem or "failed" in problem
                                    or "written" in problem), problem


def _result(**kwargs) -> JobResult:
    return JobResult(status=kwargs.pop("status", "ok"), **kwargs)


REFERENCES = {"nominal": {}, "nominal-second": {}, "jitter-0": {}}
SCHEDULED = {"calls": [{"index": 0}, {"index": 1}]}
ALL_CALLS = [{"kind": "call", "trial": t} for t in ("nominal", "nominal-second", "repeat", "jitter-0")] + \
    [{"kind": "schedule-call", "index": i} for i in (0, 1)]


def test_every_planned_call_observed_and_acknowledged_is_complete():
    acks = [{"kind": "fed-ack", "seq": 0, "bytes": 10}, {"kind": "fed-ack", "seq": 1, "bytes": 5}]
    result = _result(messages=ALL_CALLS + acks, fed_bytes=[10, 5], fed_written=2)
    assert infrastructure_failure(result, REFERENCES, SCHEDULED, []) is None


@pytest.mark.parametrize("change, words", [
    ({"feed_error": "writing 33554432 bytes to the worker's stdin failed (ValueError: closed)"}, "stdin failed"),
    ({"fed_written": 1}, "only 1 of the 2 messages"),
    ({"acks": [{"kind": "fed-ack", "seq": 0, "bytes": 10}]}, "never acknowledged"),
    ({"acks": [{"kind": "fed-ack", "seq": 0, "bytes": 5}, {"kind": "fed-ack", "seq": 1, "bytes": 5}]}, "received 5"),
    ({"calls": ALL_CALLS[4:]}, "4 of 4 named trial calls"),  # the case: zero trial calls
    ({"calls": ALL_CALLS[:5]}, "1 of 2 scheduled calls"),
])
def test_an_incomplete_run_is_an_infrastructure_error_never_a_pass(change, words):
    acks = change.pop("acks", [{"kind": "fed-ack", "seq": 0, "bytes": 10}, {"kind": "fed-ack", "seq": 1, "bytes": 5}])
    calls = change.pop("calls", ALL_CALLS)
    result = _result(messages=calls + acks, fed_bytes=[10, 5], fed_written=change.pop("fed_written", 2), **change)
    reason = infrastructure_failure(result, REFERENCES, SCHEDULED, [])
    assert reason is not None and reason.startswith("infrastructure error") and words in reason, reason
    assert "gatekeeper fault" in reason and "run it again" in reason  # what broke and what to do


def test_a_crash_of_the_submission_stays_its_finding():
    # Calls missing because the worker died: the crash is the verdict (a reject), not an ERROR.
    result = _result(status="crashed", detail="the worker ended in phase 'call'", messages=ALL_CALLS[:1],
                     fed_bytes=[10, 5], fed_written=1)
    found = worker_failure(result, StageName.BEHAVIOUR, {}, None)
    assert [f.rule for f in found] == ["GK662"]
    assert infrastructure_failure(result, REFERENCES, SCHEDULED, found) is None


def _behaviour(report):
    return next(s for s in report.stages if s.name.value == "behaviour")


@pytest.mark.slow
@pytest.mark.long
@pytest.mark.parametrize("mib", [512, 128, 32])
def test_a_large_relu_returning_its_input_is_called_and_rejected_under_load(tmp_path, mib):
    problem = write_relu_problem(tmp_path, mib)
    # 32 MiB is where the dropped trials message showed (7 of 9 runs): a burner at full
    # priority competes with the workers there. At 128 and 512 MiB (minutes each) it runs at
    # nice 19: no core is idle, but it does not take half a core from the rest of the suite.
    with CpuBurner(nice=0 if mib <= 32 else 19):
        report = gatekeeper.check(CLONE, problem, stages="behaviour", keep_going=True)
    codes = {f.rule for f in report.findings if f.severity.value == "error"}
    assert report.verdict.value == "reject", (report.error, _behaviour(report).reason, codes)
    assert "GK601" in codes  # the named trials ran: wrong on nominal
    info = stage.LAST_SCHEDULE
    short = [s for s in info.get("skipped", []) if "not enough disk" in s]
    if short and info["sent"] < MIN_LARGE_CALLS:
        # The disk guard stopped the schedule, as it must on a disk that cannot hold the
        # transfer files (the 512 MiB case needs about 20 GiB free in TMPDIR): this machine
        # cannot run the case, which says nothing about the schedule.
        pytest.skip(f"this machine's disk cannot hold the {mib} MiB case's transfer files: {short[0]}")
    # The call schedule ran at this size too, value trials included (issue 22: no skip above 24 MiB).
    assert info["sent"] >= MIN_LARGE_CALLS and info["observed"] == info["sent"], info
    assert set(info["dists"]) - {"normal"}, info
    assert "GK677" in codes or "GK673" in codes  # wrong on the scheduled calls as well
    # Even the shortest schedule holds the repeats and fresh calls the repeated-contents probe
    # needs: it judged (no GK679 note), and a clone does the same work on repeated contents.
    assert "GK679" not in {f.rule for f in report.findings} and "GK678" not in codes


@pytest.mark.slow
@pytest.mark.long
def test_an_honest_large_relu_passes(tmp_path):
    problem = write_relu_problem(tmp_path, 32)
    honest = tmp_path / "honest_relu.py"
    honest.write_text("import torch\nimport torch.nn as nn\n\nclass ModelNew(nn.Module):\n"
                      "    def forward(self, x):\n        return x.clamp_min(0.0)\n", "utf-8")
    from gatekeeper.config import Config, RuleSettings

    # torch computes this ReLU, which the torch-fallback rules (static and run-time) rightly
    # reject: they are switched off, so that what is checked is that a correct large
    # submission is called on every planned call and passes.
    report = gatekeeper.check(honest, problem, stages="behaviour", keep_going=True,
                              config=Config(ignore=["torch-fallback"], rules={"GK667": RuleSettings(enabled=False)}))
    assert report.verdict.value == "pass", (report.error, _behaviour(report).reason,
                                            [(f.rule, f.message) for f in report.findings])
    assert stage.LAST_SCHEDULE["observed"] == stage.LAST_SCHEDULE["sent"] >= MIN_LARGE_CALLS


def test_a_reference_that_failed_after_starting_still_names_its_device():
    # A disk-full reference worker on an H100 (2026-12-05) was reported as "device: cpu".
    from gatekeeper.behaviour.stage import _reference_failure

    ref = _result(status="crashed", detail="No space left on device",
                  messages=[{"kind": "env", "torch": "2.11.0", "cuda": True, "device": "cuda:0",
                             "gpu": "NVIDIA H100 80GB HBM3"}])
    environment: dict = {"isolation": "bwrap"}
    outcome = _reference_failure(ref, environment)
    assert outcome is not None and outcome.status.value == "error"
    assert outcome.environment["device"] == "cuda:0" and outcome.environment["gpu"] == "NVIDIA H100 80GB HBM3"
