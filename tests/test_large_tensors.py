"""Large tensors between workers and the parent (issue 11 item 5): above the transfer
threshold a tensor travels as a file whose digest rides in the signed frame. The threshold
is lowered to 1 MiB here, so 8 MiB tensors exercise the path without GiB allocations."""

import os
from pathlib import Path

import pytest
import torch

import gatekeeper
from gatekeeper.behaviour.compare import compare, error_ratio
from gatekeeper.sandbox import run_job
from gatekeeper.sandbox.spill import BYTES_ENV, DIR_ENV, FileData, SpillError, adopt, adopt_tree, write
from gatekeeper.sandbox.tensors import pack, unpack

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
PROBLEM = FIXTURES / "problems" / "cpu_large_output.py"
TIMEOUTS = {"import": 60, "call": 60}


@pytest.fixture
def low_threshold(monkeypatch):
    monkeypatch.setenv(BYTES_ENV, str(1 << 20))


def _tolerance(_dtype):
    return 1e-5, 1e-5


def _send(code):
    return run_job("gatekeeper.sandbox.selftest:run_code", {"code": code}, timeouts=TIMEOUTS, default_timeout_s=60)


MAKE = """
import os, torch
from gatekeeper.sandbox.tensors import pack
torch.manual_seed(0)
packed = pack(torch.randn(2048, 1024))
path = os.path.join(os.environ['GATEKEEPER_SPILL_DIR'], packed['file']['name'])
"""


@pytest.mark.slow
def test_a_large_tensor_crosses_as_a_verified_file(low_threshold):
    result = _send(MAKE + "result = {'big': packed, 'small': pack(torch.arange(5))}")
    assert result.status == "ok", result
    value = result.first("result")["value"]
    assert isinstance(value["big"]["data"], FileData) and "file" not in value["big"]
    # Under the threshold: inline, as before, as a read-only view of the received frame (no copy).
    small = value["small"]["data"]
    assert isinstance(small, memoryview) and small.readonly and small.nbytes == 5 * 8
    torch.manual_seed(0)
    assert torch.equal(unpack(value["big"]), torch.randn(2048, 1024))
    assert torch.equal(unpack(value["small"]), torch.arange(5))


@pytest.mark.slow
@pytest.mark.parametrize("tamper, why", [
    ("with open(path, 'r+b') as f: f.seek(12345); f.write(b'\\x00\\x01\\x02\\x03')", "digest"),
    ("os.truncate(path, 1000)", "bytes"),
    ("os.unlink(path)", "missing"),
    ("packed['file']['name'] = '../../etc/passwd'", "name"),
    ("os.link(path, path + '.keep')", "another link"),
    ("os.unlink(path); os.mkfifo(path)", "not a plain file"),
])
def test_a_tampered_transfer_file_is_forged_never_ok(low_threshold, tamper, why):
    result = _send(MAKE + tamper + "\nresult = packed")
    assert result.status == "forged", result
    assert why in result.detail and result.first("result") is None


def test_worker_side_read_checks_size_and_digest(tmp_path):
    tensor = torch.randn(300, 70)
    descriptor = write(tensor, str(tmp_path))
    from gatekeeper.sandbox.spill import read_into

    assert torch.equal(read_into(descriptor, torch.empty(300, 70), str(tmp_path)), tensor)
    with pytest.raises(SpillError, match="digest"):
        read_into(dict(descriptor, sha256="0" * 64), torch.empty(300, 70), str(tmp_path))
    with pytest.raises(SpillError, match="bytes"):
        read_into(descriptor, torch.empty(300, 71), str(tmp_path))
    adopted = adopt(descriptor, str(tmp_path))
    assert not (tmp_path / descriptor["name"]).exists()  # unlinked: nobody else can find it
    assert torch.equal(adopted.tensor(torch.float32).reshape(300, 70), tensor)


def _file_packed(tensor, folder):
    packed = {"__tensor__": True, "dtype": str(tensor.dtype).replace("torch.", ""), "shape": list(tensor.shape),
              "stride": list(tensor.stride()), "device": "cpu", "file": write(tensor, str(folder))}
    return adopt_tree(packed, str(folder))


def test_chunked_comparison_matches_on_files_and_inline_bytes(tmp_path, monkeypatch):
    import gatekeeper.behaviour.chunks as chunks

    monkeypatch.setattr(chunks, "CHUNK_ELEMENTS", 1000)  # many pieces, ragged last one
    ref = torch.randn(123, 77)
    inline, on_file = pack(ref), _file_packed(ref, tmp_path)
    assert compare(inline, on_file, _tolerance).ok and compare(on_file, inline, _tolerance).ok
    wrong = ref.clone()
    wrong[100, 3] += 1.0
    wrong[5, 70] -= 0.5
    result = compare(on_file, _file_packed(wrong, tmp_path), _tolerance)
    assert not result.ok and result.reason == "values"
    assert result.evidence["mismatched"] == 2 and result.evidence["max_abs_error"] == pytest.approx(1.0, rel=1e-6)
    nan = ref.clone()
    nan[120, 0] = float("nan")
    assert compare(on_file, _file_packed(nan, tmp_path), _tolerance).reason == "nan"
    ints = torch.arange(9000)
    assert compare(pack(ints), _file_packed(ints, tmp_path), _tolerance).ok
    assert not compare(pack(ints), _file_packed(ints.flip(0), tmp_path), _tolerance).ok


def test_chunked_error_budget_equals_the_whole_tensor_formula(tmp_path, monkeypatch):
    import gatekeeper.behaviour.chunks as chunks

    monkeypatch.setattr(chunks, "CHUNK_ELEMENTS", 777)
    exact = torch.randn(64, 100, dtype=torch.float64)
    ref32 = exact.float()
    truncated = exact.to(torch.bfloat16).float()
    result = error_ratio(pack(ref32), _file_packed(exact, tmp_path), _file_packed(truncated, tmp_path))
    honest = float((ref32.double() - exact).pow(2).mean().sqrt())
    error = float((truncated.double() - exact).pow(2).mean().sqrt())
    assert result["honest"] == pytest.approx(honest, rel=1e-9) and result["error"] == pytest.approx(error, rel=1e-9)
    assert result["ratio"] > 100  # bf16 truncation is far less accurate than float32


HONEST = "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return torch.relu(x) * 2.0\n"
WRONG = "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return torch.relu(x) * 2.5\n"


def _check(tmp_path, source):
    from gatekeeper.config import Config, RuleSettings

    path = tmp_path / "sub.py"
    path.write_text(source)
    # Plain torch on purpose: who did the work (GK667) is tested elsewhere.
    config = Config(rules={"GK667": RuleSettings(enabled=False)})
    report = gatekeeper.check(path, PROBLEM, stages="behaviour", keep_going=True, config=config)
    return report, next(s for s in report.stages if s.name.value == "behaviour")


@pytest.mark.slow
def test_large_output_problem_honest_passes_and_wrong_is_rejected(low_threshold, tmp_path):
    report, stage = _check(tmp_path, HONEST)
    assert stage.status.value == "passed", (stage.reason, [(f.rule, f.message) for f in report.findings])
    report, stage = _check(tmp_path, WRONG)
    assert stage.status.value == "failed", stage.reason
    assert "GK601" in {f.rule for f in report.findings}


BIG_INPUT = '''
import torch
import torch.nn as nn
rows = 4096
cols = 1536
class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x) * 2.0
def get_inputs():
    return [torch.randn(rows, cols)]
def get_init_inputs():
    return []
'''


@pytest.mark.slow
def test_a_problem_over_sixteen_thresholds_is_jittered_down_only(low_threshold, tmp_path):
    # 24 MiB of nominal input against 16 x 1 MiB: jittered trials never grow past nominal.
    problem = tmp_path / "big_input.py"
    problem.write_text(BIG_INPUT)
    (tmp_path / "big_input.toml").write_text('device = "cpu"\n')
    from gatekeeper.config import Config, RuleSettings

    path = tmp_path / "sub.py"
    path.write_text(WRONG)
    report = gatekeeper.check(path, problem, stages="behaviour", keep_going=True,
                              config=Config(rules={"GK667": RuleSettings(enabled=False)}))
    wrong = next(f for f in report.findings if f.rule == "GK601")
    shapes = wrong.evidence["trial_shapes"]
    nominal = shapes["nominal"][0][0] * shapes["nominal"][0][1]
    jittered = {name: s[0][0] * s[0][1] for name, s in shapes.items() if name.startswith("jitter") and s}
    assert jittered and all(size <= nominal for size in jittered.values()), shapes
    assert any(size < nominal for size in jittered.values())


def test_infinite_reference_values_are_checked_exactly(tmp_path, monkeypatch):
    import gatekeeper.behaviour.chunks as chunks

    monkeypatch.setattr(chunks, "CHUNK_ELEMENTS", 64)
    ref = torch.randn(1000)
    ref[500] = float("inf")
    same, finite_there = ref.clone(), ref.clone()
    finite_there[500] = 5.0  # within "atol + rtol * inf" of inf, but not inf: wrong
    assert compare(pack(ref), _file_packed(same, tmp_path), _tolerance).ok
    result = compare(pack(ref), _file_packed(finite_there, tmp_path), _tolerance)
    assert not result.ok and result.evidence["mismatched"] == 1


def test_the_float32_fast_path_never_passes_what_float64_rejects(tmp_path, monkeypatch):
    import gatekeeper.behaviour.chunks as chunks

    monkeypatch.setattr(chunks, "CHUNK_ELEMENTS", 256)
    ref = torch.randn(4096)
    allowed = 1e-5 + 1e-5 * ref.double().abs()
    # Just inside and just outside the float64 bound, in float32: the verdicts must match float64's.
    for factor in (0.9999999, 1.0000001, 0.99995, 1.00005):
        got = (ref.double() + allowed * factor).float()
        exact = bool(((got.double() - ref.double()).abs() <= allowed).all())
        assert compare(pack(ref), _file_packed(got, tmp_path), _tolerance).ok == exact, factor


def test_error_budget_counts_only_finite_values(tmp_path, monkeypatch):
    import gatekeeper.behaviour.chunks as chunks

    monkeypatch.setattr(chunks, "CHUNK_ELEMENTS", 100)
    exact = torch.randn(1000, dtype=torch.float64)
    ref32, got = exact.float(), exact.to(torch.bfloat16).float()
    exact[7], got[450] = float("inf"), float("nan")  # both positions drop out of every sum
    keep = torch.ones(1000, dtype=torch.bool)
    keep[7] = keep[450] = False
    result = error_ratio(pack(ref32), _file_packed(exact, tmp_path), _file_packed(got, tmp_path))
    want = float((got.double()[keep] - exact[keep]).pow(2).mean().sqrt())
    assert result["error"] == pytest.approx(want, rel=1e-9)
