"""The test markers do what pyproject.toml and README say: `-m "not slow"` keeps the rule and
static tests and leaves out the sandbox/subprocess ones; `gpu` tests skip without a GPU."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # runs pytest itself in subprocesses

ROOT = Path(__file__).resolve().parent.parent


def _collect(*args: str) -> list[str]:
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
                         cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    return [line for line in out.stdout.splitlines() if "::" in line]


def test_not_slow_keeps_the_rule_tests_and_drops_the_sandbox_ones():
    fast = _collect("-m", "not slow", "tests/test_rule_examples.py", "tests/test_behaviour.py", "tests/test_fixtures.py")
    assert any(n.startswith("tests/test_rule_examples.py::test_invalid_example_is_flagged") for n in fast)
    assert any(n.startswith("tests/test_fixtures.py::test_static_fixture") for n in fast)
    assert not [n for n in fast if n.startswith(("tests/test_behaviour.py", "tests/test_fixtures.py::test_run_fixture"))]
    everything = _collect("tests/test_behaviour.py")
    assert everything  # the marker deselects them; it does not hide them from a full run


def test_long_tests_are_handed_out_first_then_slow_then_the_rest():
    order = _collect("tests/test_attribution.py", "tests/test_large_problems.py", "tests/test_rule_examples.py")
    kinds = ["long" if "large_relu" in n else "slow" if n.startswith(("tests/test_attribution.py",
                                                                      "tests/test_large_problems.py")) else "fast"
             for n in order]
    long_end = kinds.index("slow")
    assert set(kinds[:long_end]) == {"long"} and long_end == 4, order[:6]
    assert order[0].endswith("[512]")  # the longest of all first
    assert "long" not in kinds[long_end:]


def test_gpu_tests_are_skipped_without_a_gpu(tmp_path):
    (tmp_path / "conftest.py").write_text((ROOT / "tests" / "conftest.py").read_text())
    (tmp_path / "test_needs_gpu.py").write_text(
        "import pytest\n\n@pytest.mark.gpu\ndef test_on_the_gpu():\n"
        "    import torch\n    assert torch.cuda.is_available()\n"
    )
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", str(tmp_path)],
                         cwd=tmp_path, capture_output=True, text=True, timeout=600)
    import torch

    expected = "1 passed" if torch.cuda.is_available() else "1 skipped"
    assert expected in run.stdout, run.stdout + run.stderr


def test_under_two_workers_the_long_tests_start_on_different_workers(tmp_path):
    # README's command (-n 2, work stealing): each worker starts on a block of the list; the
    # long tests must not all sit in the first block, one after another on one worker.
    (tmp_path / "conftest.py").write_text((ROOT / "tests" / "conftest.py").read_text())
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    long: minutes\n    slow: seconds\n")
    longs = "".join(f"@pytest.mark.slow\n@pytest.mark.long\ndef test_long_{i}():\n    _record('long_{i}')\n\n\n"
                    for i in range(4))
    (tmp_path / "test_mixed.py").write_text(
        "import os\nimport time\nfrom pathlib import Path\n\nimport pytest\n\n\n"
        "def _record(name):\n    Path(__file__).with_name(name + '.worker').write_text(os.environ['PYTEST_XDIST_WORKER'])\n"
        "    time.sleep(0.5)\n\n\n"
        "@pytest.mark.parametrize('i', range(40))\ndef test_fast(i):\n    pass\n\n\n" + longs)
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "2", "-p", "no:cacheprovider", str(tmp_path)],
                         cwd=tmp_path, capture_output=True, text=True, timeout=600,
                         env={**os.environ, "GATEKEEPER_TEST_WARM_BUILDS": "0"})
    assert "44 passed" in run.stdout, run.stdout + run.stderr
    workers = [(tmp_path / f"long_{i}.worker").read_text() for i in range(4)]
    assert workers[0] != workers[1] and workers[2] != workers[3], workers


def test_the_session_leaves_bytecode_for_the_workers_it_starts():
    # conftest._compile_bytecode: sandboxed workers run with -B and cannot write their own,
    # and PYTHONDONTWRITEBYTECODE keeps this process from writing it on import.
    import importlib.util

    root = Path(__file__).resolve().parent.parent
    for source in (root / "gatekeeper" / "sandbox" / "worker.py", root / "gatekeeper" / "behaviour" / "subject_job.py",
                   root / "rules" / "gk101_returns_persistent_tensor.py"):
        cached = Path(importlib.util.cache_from_source(str(source)))
        assert cached.is_file(), cached
        # the bytecode records the source's mtime and size: what import checks before using it
        header = cached.read_bytes()[8:16]
        stat = source.stat()
        assert int.from_bytes(header[:4], "little") == int(stat.st_mtime) & 0xFFFFFFFF
        assert int.from_bytes(header[4:], "little") == stat.st_size & 0xFFFFFFFF
