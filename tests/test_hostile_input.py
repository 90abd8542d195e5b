"""Malformed, hostile and huge inputs to `gatekeeper check` (a red-team pass on input
robustness): each gets a clear message and the contract's exit code (2 usage or
configuration, 3 problem or infrastructure), never a traceback, a hang, or a pass for
files that were never read."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PROBLEM = ROOT / "fixtures" / "problems" / "cpu_mean.py"
HARD = ROOT / "fixtures" / "problems" / "kbhard_head_rmsnorm"
HONEST = ROOT / "fixtures" / "hostile" / "honest_python.py"

# Root reads every file whatever its mode: drop the capabilities that let it, so that a
# mode of 000 means what it says (the tester's recipe).
_NO_DAC = ["setpriv", "--bounding-set=-dac_override,-dac_read_search",
           "--inh-caps=-dac_override,-dac_read_search", "--"]


def gk(*args, cwd=None, stdin=None, no_dac: bool = False, timeout: int = 120) -> subprocess.CompletedProcess:
    prefix = _NO_DAC if no_dac and os.geteuid() == 0 else []
    proc = subprocess.run([*prefix, sys.executable, "-m", "gatekeeper", *map(str, args)], capture_output=True,
                          text=True, cwd=cwd or ROOT, timeout=timeout, stdin=stdin)
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr
    return proc


def _flat(text: str) -> str:
    """Text output wraps long messages: compare with the line breaks gone."""
    return " ".join(text.split())


def _permissions_bite() -> bool:
    return os.geteuid() != 0 or shutil.which("setpriv") is not None


needs_permissions = pytest.mark.skipif(not _permissions_bite(), reason="root without setpriv reads any file")


def _locked(folder: Path) -> Path:
    folder.mkdir()
    (folder / "evil.py").write_text("class ModelNew: pass\n")
    folder.chmod(0)
    return folder


# --- 1, 2: folders and entries that cannot be read ------------------------------------------

@needs_permissions
def test_a_named_folder_that_cannot_be_read_is_a_usage_error(tmp_path):
    locked = _locked(tmp_path / "noreaddir")
    try:
        proc = gk("check", locked, "-p", PROBLEM, "--static-only", no_dac=True)
    finally:
        locked.chmod(0o755)
    assert proc.returncode == 2 and f"cannot read folder {locked}" in proc.stderr


@needs_permissions
@pytest.mark.parametrize("fmt", ["text", "json", "sarif"])
def test_an_unreadable_subfolder_is_named_and_never_passes(tmp_path, fmt):
    (tmp_path / "ok").mkdir()
    shutil.copy(HONEST, tmp_path / "ok" / "a.py")
    locked = _locked(tmp_path / "locked")
    try:
        proc = gk("check", tmp_path, "-p", PROBLEM, "--static-only", "-f", fmt, no_dac=True)
    finally:
        locked.chmod(0o755)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert str(locked) in proc.stderr and "permission denied" in proc.stderr and proc.stdout == ""


def test_fifos_loops_and_device_links_in_a_folder_are_named(tmp_path):
    shutil.copy(HONEST, tmp_path / "a.py")
    os.mkfifo(tmp_path / "fifo.py")
    os.symlink("l2.py", tmp_path / "l1.py")
    os.symlink("l1.py", tmp_path / "l2.py")
    os.symlink("/dev/zero", tmp_path / "z.py")
    os.symlink("..", tmp_path / "up")  # a link to a folder is not followed, and not an error
    proc = gk("check", tmp_path, "-p", PROBLEM, "--static-only")
    assert proc.returncode == 2
    for name, why in (("fifo.py", "named pipe"), ("l1.py", "symbolic link loop"), ("z.py", "character device")):
        assert f"{tmp_path / name} (" in proc.stderr and why in proc.stderr, proc.stderr
    assert "extend-exclude" in proc.stderr
    # The near miss: excluded, they are not read, and the folder's one file is checked.
    (tmp_path / "gatekeeper.toml").write_text('extend-exclude = ["fifo.py", "l?.py", "z.py"]\n')
    checked = gk("check", tmp_path, "-p", PROBLEM, "--static-only", "-q")
    assert checked.returncode in (0, 1) and checked.stdout.count("a.py") == 1, checked.stdout


def test_a_link_to_a_device_says_what_it_is(tmp_path):
    os.symlink("/dev/zero", tmp_path / "devzero.py")
    proc = gk("check", tmp_path / "devzero.py", "-p", PROBLEM, "--static-only")
    assert proc.returncode == 2
    assert "a character device, not a regular file" in proc.stderr and "does not exist" not in proc.stderr


# --- 3, 6: problems whose side files are invalid --------------------------------------------

def _hard(tmp_path: Path, *, yaml: str = "", shapes: str = "", sidecar: str = "") -> Path:
    folder = tmp_path / "problem"
    shutil.copytree(HARD, folder)
    if yaml:
        (folder / "problem.yaml").write_text(yaml)
    if shapes:
        (folder / "shapes.py").write_text(shapes)
    if sidecar:
        (folder / "reference.toml").write_text(sidecar)
    return folder


@pytest.mark.parametrize("tolerance,why", [
    ("{atol: -1.0, rtol: -1.0}", "finite number >= 0"), ("{atol: .nan, rtol: 1.0}", "finite number >= 0"),
    ("{atol: .inf, rtol: .inf}", "finite number >= 0"), ("{atol: abc, rtol: 1.0}", "must be a number"),
])
@pytest.mark.parametrize("fmt", ["text", "sarif"])
def test_bad_problem_yaml_tolerances_are_problem_errors(tmp_path, tolerance, why, fmt):
    folder = _hard(tmp_path, yaml=f'name: x\ntolerance:\n  "torch.float32": {tolerance}\n')
    proc = gk("check", HONEST, "-p", folder, "--static-only", "-f", fmt)
    assert proc.returncode == 3 and why in _flat(proc.stdout), proc.stdout
    if fmt == "sarif":
        assert json.loads(proc.stdout)["runs"]


@pytest.mark.parametrize("sidecar,why", [
    ("[tolerances.float32]\natol = inf\nrtol = inf\n", "finite number"),
    ('dtype = "float128"\n', "unknown dtype 'float128'"),
    ("[tolerances.float128]\natol = 1e-3\nrtol = 1e-3\n", "unknown dtype 'float128'"),
])
def test_bad_sidecar_values_are_problem_errors(tmp_path, sidecar, why):
    problem = tmp_path / "p.py"
    shutil.copy(PROBLEM, problem)
    problem.with_suffix(".toml").write_text(sidecar)
    proc = gk("check", HONEST, "-p", problem, "--static-only")
    assert proc.returncode == 3 and why in _flat(proc.stdout), proc.stdout


def test_an_unknown_dtype_in_problem_yaml_is_a_problem_error(tmp_path):
    folder = _hard(tmp_path, yaml='tolerance:\n  "torch.float128": 0.01\n')
    proc = gk("check", HONEST, "-p", folder, "--static-only")
    assert proc.returncode == 3 and "unknown dtype 'torch.float128'" in _flat(proc.stdout)


@pytest.mark.parametrize("shapes,why", [
    ("SHAPES = 42\n", "SHAPES is int 42"),
    ('SHAPES = [{"BATCH": "two", "SEQ": 64, "HEADS": 4, "HEAD_DIM": 128}]\n', "sizes BATCH"),
    ('SHAPES = [{"BATCH": -2, "SEQ": 64, "HEADS": 4, "HEAD_DIM": 128}]\n', "int -2"),
    ('SHAPES = [{"BTACH": 2, "SEQ": 64, "HEADS": 4, "HEAD_DIM": 128}]\n', "did you mean 'BATCH'"),
    ('SHAPES = ["BATCH"]\n', "entry 1 is str"),
])
def test_invalid_shapes_py_is_a_problem_error(tmp_path, shapes, why):
    folder = _hard(tmp_path, shapes=shapes)
    proc = gk("check", HONEST, "-p", folder, "--static-only")
    assert proc.returncode == 3 and why in _flat(proc.stdout) and "shapes.py" in proc.stdout, proc.stdout


def test_sizes_whose_product_is_astronomical_are_still_a_problem(tmp_path):
    # One entry's sizes size different tensors (a paged KV cache: blocks, context, batch): their
    # product is no tensor's size, so it is no reason to refuse the problem.
    folder = _hard(tmp_path, shapes='SHAPES = [{"BATCH": 65536, "SEQ": 1048576, "HEADS": 4096, "HEAD_DIM": 128}]\n')
    proc = gk("check", HONEST, "-p", folder, "--static-only")
    assert proc.returncode in (0, 1), proc.stdout


def test_a_shapes_py_that_is_a_folder_is_a_problem_error(tmp_path):
    folder = _hard(tmp_path)
    (folder / "shapes.py").unlink()
    (folder / "shapes.py").mkdir()
    proc = gk("check", HONEST, "-p", folder, "--static-only")
    assert proc.returncode == 3 and "shapes.py: it is a folder" in _flat(proc.stdout), proc.stdout


# --- 4: a report that cannot be written -----------------------------------------------------

@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("how", ["-o", "stdout"])
@pytest.mark.parametrize("fmt", ["text", "json"])
def test_a_report_that_cannot_be_written_is_exit_3_even_for_a_pass(how, fmt):
    args = ["check", HONEST, "-p", PROBLEM, "--static-only", "-f", fmt]
    assert gk(*args).returncode == 0  # the near miss: written, it passes
    if how == "-o":
        proc = gk(*args, "-o", "/dev/full")
    else:
        with open("/dev/full", "w") as full:
            proc = subprocess.run([sys.executable, "-m", "gatekeeper", *map(str, args)], stdout=full,
                                  stderr=subprocess.PIPE, text=True, cwd=ROOT, timeout=120)
    where = "/dev/full" if how == "-o" else "standard output"
    assert proc.returncode == 3 and f"could not write the report to {where}" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


# --- 5, 7: unbounded inputs and invalid settings --------------------------------------------

def test_stdin_is_read_up_to_max_file_bytes():
    with open("/dev/zero", "rb") as zero:
        proc = gk("check", "-", "-p", PROBLEM, "--static-only", stdin=zero, timeout=60)
    assert proc.returncode == 2 and "larger than 2,000,000 bytes" in proc.stderr


@pytest.mark.parametrize("make,why", [
    (lambda p: Path("/dev/zero"), "character device"),
    (lambda p: (os.mkfifo(p / "c.toml"), p / "c.toml")[1], "named pipe"),
    (lambda p: p, "a folder"),
    (lambda p: (p / "big.toml").write_bytes(b"#" * 1_000_001) and p / "big.toml", "larger than 1,000,000 bytes"),
])
def test_a_config_that_is_not_a_small_regular_file_is_refused(tmp_path, make, why):
    proc = gk("check", HONEST, "-p", PROBLEM, "--static-only", "--config", make(tmp_path), timeout=60)
    assert proc.returncode == 2 and why in proc.stderr, proc.stderr


def test_absurd_jobs_are_refused():
    proc = gk("check", HONEST, "-p", PROBLEM, "--static-only", "-j", "10000")
    assert proc.returncode == 2 and "--jobs asks for 10000" in proc.stderr


def test_absurd_ingest_jobs_are_refused_before_any_worker_starts(tmp_path):
    store = tmp_path / "results.db"
    proc = gk("ingest", str(tmp_path), "--problems", str(tmp_path), "--store", str(store), "-j", "10000")
    assert proc.returncode == 2 and "--jobs asks for 10000" in proc.stderr, proc.stderr
    assert not store.exists()  # refused before anything was opened


@pytest.mark.parametrize("limits,key", [
    ("call_timeout_s = 0", "limits.call_timeout_s"), ("memory_mb = -5", "limits.memory_mb"),
    ("import_timeout_s = nan", "limits.import_timeout_s"),
])
def test_invalid_limits_are_configuration_errors(tmp_path, limits, key):
    config = tmp_path / "gk.toml"
    config.write_text(f"[limits]\n{limits}\n")
    proc = gk("check", HONEST, "-p", PROBLEM, "--static-only", "--config", config)
    assert proc.returncode == 2 and key in proc.stderr, proc.stderr


# --- 8: a symbolic link loop beside the submission -------------------------------------------

def test_a_link_loop_beside_the_submission_is_skipped(tmp_path):
    shutil.copy(HONEST, tmp_path / "honest.py")
    os.symlink("l2.cu", tmp_path / "l1.cu")
    os.symlink("l1.cu", tmp_path / "l2.cu")
    from gatekeeper.sandbox.isolation import bundle_sources

    assert bundle_sources(str(tmp_path / "honest.py")) == [str(tmp_path / "honest.py")]


@pytest.mark.parametrize("fmt", ["json", "jsonl", "text", "sarif", "github"])
@pytest.mark.parametrize("count", [1, 2])
def test_a_stdout_that_cannot_encode_the_report_still_gets_the_verdict(tmp_path, fmt, count):
    # A source line with `é` lands in the report's evidence; stdout here can write ASCII only.
    files = []
    for i in range(count):
        sub = tmp_path / f"sub{i}.py"
        sub.write_text("import torch\nclass ModelNew(torch.nn.Module):\n"
                       "    def forward(self, x):\n        return torch.mean(x, 0)  # \u00e9t\u00e9 \U0001d4b3\n",
                       encoding="utf-8")
        files.append(sub)
    env = {**os.environ, "PYTHONIOENCODING": "ascii"}
    proc = subprocess.run([sys.executable, "-m", "gatekeeper", "check", *map(str, files), "--problem", str(PROBLEM),
                           "--static-only", "-f", fmt], capture_output=True, cwd=ROOT, env=env, timeout=120)
    out, err = proc.stdout.decode("ascii"), proc.stderr.decode("utf-8", "replace")  # ASCII, or this raises
    assert "Traceback" not in err and proc.returncode in (0, 1), err
    if fmt == "json":
        reports = json.loads(out)
        lines = [r["findings"] for r in (reports if count > 1 else [reports])]
        assert len(lines) == count
        assert any("\u00e9t\u00e9 \U0001d4b3" in json.dumps(f, ensure_ascii=False) for f in lines[0]), out[:2000]
    elif fmt == "jsonl":
        assert len([json.loads(line) for line in out.splitlines() if line.strip()]) == count
