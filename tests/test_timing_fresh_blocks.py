"""The timing stage's two-worker method on CPU (issue 15: a timing process that looks like a
check, every call sees new data; issue 11 item 4: the L2 reset is guarded).

The CUDA timing primitives need a GPU; everything around them runs here through the same
code path the stage uses (gatekeeper.timing.stage.measure with device="cpu": real sandboxed
workers, the reference in its own process, alternating blocks, host-clock times).
"""

import json
from pathlib import Path

import pytest
import torch

from gatekeeper.config import Config
from gatekeeper.sandbox import Job
from gatekeeper.sandbox.tensors import pack
from gatekeeper.timing.fresh import FreshInputs, shift_for
from gatekeeper.timing.l2 import L2Reset
from gatekeeper.timing.outputs import compare_checks
from gatekeeper.timing.stage import gpu_name, measure

FIX = Path(__file__).resolve().parent.parent / "fixtures"
PROBLEM = FIX / "problems/seed_mean.py"
FAST = Config.model_validate({"timing": {"min_reps": 10, "max_reps": 40, "batch": 5, "budget_s": 1.0,
                                         "warmup_calls": 2, "input_sets": 8}})


def _measure(name: str, ext: Path):
    ext.mkdir()
    return measure(str(FIX / "submissions" / name), PROBLEM, FAST, seed=7, device="cpu", calibrate=False,
                   ext_dir=ext)


def _views(folder: Path) -> list[dict]:
    """The probe's views, in order, without the label of when each was taken."""
    views = [json.loads(p.read_text()) for p in folder.glob("probe-*.json")]
    views.sort(key=lambda v: v["when"] != "import")
    return [{k: v for k, v in view.items() if k != "when"} for view in views]


# -- inputs that never repeat ------------------------------------------------------------

def test_fresh_inputs_never_repeat_and_both_workers_derive_the_same_ones():
    torch.manual_seed(0)
    bases = [[torch.randn(4, 16, 48), 3] for _ in range(4)]
    a, b = FreshInputs(bases, key=11), FreshInputs([[t.clone() if isinstance(t, torch.Tensor) else t for t in s]
                                                     for s in bases], key=11)
    addresses = [w[0].data_ptr() for w in a.work]
    seen = set()
    for index in range(400):
        x = a.prepare(index)[0]
        y = b.prepare(index)[0]
        assert torch.equal(x, y)  # the reference's worker reproduces call `index` exactly
        digest = hash(tuple(x.flatten().tolist()))
        assert digest not in seen
        seen.add(digest)
        assert x.data_ptr() == addresses[index % 4]  # working buffers keep their addresses
    # A roll keeps the values' distribution: the same multiset but for the one scaled element.
    x = a.prepare(4 * 7 + 1)[0].reshape(-1)
    base = bases[1][0].reshape(-1)
    assert int((~torch.isin(x, base)).sum()) == 1 and not torch.equal(x, base)
    assert a.prepare(4)[1] == 3  # non-tensors pass through


def test_a_different_key_gives_different_inputs_and_shifts_cover_every_round():
    base = [[torch.arange(10.0)]]
    x = FreshInputs(base, key=1).prepare(1)[0].clone()
    y = FreshInputs(base, key=2).prepare(1)[0].clone()
    assert not torch.equal(x, y)
    shifts = {shift_for(5, 0, 0, r, 10) for r in range(1, 10)}
    assert shifts == set(range(1, 10))  # 9 rounds, 9 distinct shifts


def test_l2_reset_never_fails_without_a_gpu_and_works_with_one():
    reset = L2Reset()
    if gpu_name() is None:  # no libcuda, or a driver without a device: nothing raises, nothing is claimed
        reset.reset(None)
        assert reset.persisting_limit() in (None, 0)
        assert reset.available or reset.errors == []
    else:  # the calls must succeed on torch's context
        torch.zeros(1, device="cuda")
        reset.reset(torch.cuda.current_stream().cuda_stream)
        assert reset.persisting_limit() == 0 and reset.errors == []


# -- the two-worker method, end to end on CPU ---------------------------------------------

@pytest.mark.slow
def test_honest_probe_sees_no_reference_and_its_timed_outputs_match(tmp_path):
    out = _measure("timing_probe_introspect.py", tmp_path / "ext")
    assert out.failed is None, (out.reference and out.reference.messages[-3:], out.submission and
                                out.submission.stderr_tail)
    assert out.reference.status == "ok" and out.submission.status == "ok"
    n = len(out.paired.submission_us)
    assert n >= 10 and len(out.paired.reference_us) == n and len(out.alone.reference_us) >= 10
    assert out.calls >= n  # every paired call had its own index, hence its own inputs
    check = compare_checks(out.checks)
    assert check["checked"] >= 2 and check["mismatches"] == []
    views = _views(tmp_path / "ext")
    assert len(views) == 2  # at import, and once at the first call: nothing changes between timed calls
    for view in views:
        assert view["problem_file"] is None  # never the problem file: at most the checking worker's decoy
        assert view["input_version"] in (None, 0)  # as a benchmark's torch.randn input, and the checking worker's


@pytest.mark.slow
def test_timing_worker_loads_what_the_checking_worker_loads(tmp_path):
    """The probe's view from the checking worker (behaviour's subject job, fed one nominal
    trial as the behaviour stage does) equals its view from the timing worker."""
    timing = tmp_path / "timing"
    _measure("timing_probe_introspect.py", timing)
    checking = tmp_path / "checking"
    checking.mkdir()
    job = Job("gatekeeper.behaviour.subject_job:subject_job",
              {"submission": str(FIX / "submissions/timing_probe_introspect.py"), "device": "cpu", "poison": True},
              timeouts={"start": 120, "import": 120}, default_timeout_s=60, memory_mb=8192,
              env={"TORCH_EXTENSIONS_DIR": str(checking), "OMP_NUM_THREADS": "1"}, write_roots=[str(checking)],
              keep_stdin=True)
    job.feed({"device": "cpu", "trials": [{"name": "nominal", "init": [], "init_seed": 1,
                                           "inputs": [pack(torch.randn(4, 16, 48))]}]}, close=False)
    job._feeder.join(30)
    job.feed({"calls": [{"index": i, "kind": "fresh", "inputs": [pack(torch.randn(4, 16, 48))]} for i in range(4)],
              "timed_from": 2})
    assert job.wait().status == "ok"
    seen_checking, seen_timing = _views(checking), _views(timing)
    assert seen_timing[0] == seen_checking[0]  # at import
    for view in seen_timing:
        assert view in seen_checking, view  # every view timing gives, checking gave too


@pytest.mark.slow
def test_memo_armed_by_the_reference_class_never_hits(tmp_path):
    # Armed by the decoy, as in the checking worker's timed schedule part (where the
    # behaviour stage rejects it); in timing every call is new, so it gains nothing.
    out = _measure("timing_memo_on_reference.py", tmp_path / "ext")
    assert out.failed is None
    stats = json.loads(next((tmp_path / "ext").glob("memo-*.json")).read_text())
    assert stats["calls"] > 10 and stats["armed"] is True and stats["hits"] == 0
    assert compare_checks(out.checks)["mismatches"] == []


@pytest.mark.slow
def test_address_keyed_memo_is_caught_by_the_timed_output_check(tmp_path):
    out = _measure("timing_address_memo.py", tmp_path / "ext")
    assert out.failed is None
    check = compare_checks(out.checks)
    assert check["checked"] >= 2 and len(check["mismatches"]) >= 1
    assert "sampled elements off" in check["detail"]


@pytest.mark.slow
@pytest.mark.parametrize("broken", ["def forward(", "raise RuntimeError('no import for you')"])
def test_a_submission_that_cannot_load_fails_on_its_side(tmp_path, broken):
    bad = tmp_path / "bad.py"
    bad.write_text(broken + "\n")
    ext = tmp_path / "ext"
    ext.mkdir()
    out = measure(str(bad), PROBLEM, FAST, seed=7, device="cpu", calibrate=False, ext_dir=ext)
    assert out.failed == "submission"
    assert out.submission is not None and out.submission.first("error") is not None
    assert out.reference is not None and out.reference.status == "ok"


@pytest.mark.slow
def test_input_sets_sent_as_files_reach_the_submission(tmp_path, monkeypatch):
    # Large inputs travel as files (gatekeeper.sandbox.spill); a 1 KiB threshold sends every set so.
    monkeypatch.setenv("GATEKEEPER_SPILL_BYTES", "1024")
    out = _measure("timing_probe_introspect.py", tmp_path / "ext")
    assert out.failed is None, (out.reference and out.reference.detail, out.submission and out.submission.stderr_tail)
    assert out.reference.status == "ok" and out.submission.status == "ok"
    check = compare_checks(out.checks)
    assert check["checked"] >= 2 and check["mismatches"] == []
