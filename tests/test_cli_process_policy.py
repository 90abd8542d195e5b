"""The collector and exit policy of a `gatekeeper check` process (gatekeeper/cli_gc.py).

Each case runs in a fresh interpreter: freezing or leaving with os._exit must never happen
to a process that is not gatekeeper's own (this test process included)."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import textwrap
from pathlib import Path

from gatekeeper import cli_gc

ROOT = Path(__file__).resolve().parent.parent


def _python(code: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=cwd, capture_output=True, text=True,
                          timeout=120)


def test_in_process_callers_keep_their_collector():
    """Without own_process (tests, the library), neither freezing nor turning the collector off."""
    frozen = gc.get_freeze_count()
    was_on = gc.isenabled()
    with cli_gc.collector_off_until_frozen():
        assert gc.isenabled() == was_on
        assert list(cli_gc.frozen_after_first([1, 2, 3])) == [1, 2, 3]
    assert gc.get_freeze_count() == frozen
    assert gc.isenabled() == was_on
    assert gc.get_threshold()[0] != cli_gc.YOUNG_THRESHOLD
    cli_gc.exit_now(0)  # returns: this process is not gatekeeper's own


def test_own_process_freezes_after_the_first_item(tmp_path):
    result = _python("""
        import gc
        from gatekeeper import cli_gc
        cli_gc.own_process()
        keep = [object() for _ in range(10)]
        with cli_gc.collector_off_until_frozen():
            assert not gc.isenabled()
            seen = []
            for item in cli_gc.frozen_after_first(["a", "b"]):
                seen.append((item, gc.isenabled(), gc.get_freeze_count() > 0))
        assert seen == [("a", False, False), ("b", True, True)], seen
        assert gc.isenabled() and gc.get_threshold()[0] == cli_gc.YOUNG_THRESHOLD
        print("ok")
    """, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_collector_restored_when_nothing_was_produced(tmp_path):
    result = _python("""
        import gc
        from gatekeeper import cli_gc
        cli_gc.own_process()
        try:
            with cli_gc.collector_off_until_frozen():
                raise ValueError("stop")
        except ValueError:
            pass
        assert gc.isenabled() and gc.get_freeze_count() == 0
        print("ok")
    """, tmp_path)
    assert result.returncode == 0, result.stderr


def test_exit_now_runs_atexit_and_flushes(tmp_path):
    marker = tmp_path / "atexit.txt"
    result = _python(f"""
        import atexit, sys
        from gatekeeper import cli_gc
        atexit.register(lambda: open({str(marker)!r}, "w").write("ran"))
        cli_gc.own_process()
        cli_gc.exit_now(5)  # no check finished yet: returns
        cli_gc.check_finished()
        sys.stdout.write("buffered, no newline")
        cli_gc.exit_now(3)
        print("not reached")
    """, tmp_path)
    assert result.returncode == 3, result.stderr
    assert result.stdout == "buffered, no newline"
    assert marker.read_text() == "ran"


def test_exit_now_leaves_a_live_thread_to_the_interpreter(tmp_path):
    result = _python("""
        import threading, time
        from gatekeeper import cli_gc
        cli_gc.own_process()
        cli_gc.check_finished()
        done = []
        worker = threading.Thread(target=lambda: (time.sleep(0.5), done.append(1), print("joined", flush=True)))
        worker.start()
        cli_gc.exit_now(3)  # a non-daemon thread is alive: returns, the interpreter joins it
        print("returned", flush=True)
    """, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["returned", "joined"]


def test_cli_check_reports_and_exit_codes(tmp_path):
    """The console entry point with the policy on: the JSON and the exit status of a pass and a
    reject are what the library reports, written whole to a pipe and to --output-file."""
    import gatekeeper

    honest = tmp_path / "honest.py"
    honest.write_text("import torch\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n"
                      "        return x\n")
    hacked = tmp_path / "hacked.py"
    hacked.write_text("import torch, inspect\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n"
                      "        inspect.stack()\n        return x\n")
    for path in (honest, hacked):
        expected = gatekeeper.check_static(path, None)
        proc = subprocess.run([sys.executable, "-m", "gatekeeper", "check", str(path), "--static-only", "-f", "json"],
                              cwd=tmp_path, capture_output=True, text=True, timeout=120)
        assert proc.returncode == expected.exit_code, proc.stderr
        got = json.loads(proc.stdout)
        assert got["verdict"] == expected.verdict.value
        assert [f["rule"] for f in got["findings"]] == [f.rule for f in expected.findings]
        out = tmp_path / "out.json"
        proc = subprocess.run([sys.executable, "-m", "gatekeeper", "check", str(path), "--static-only", "-f", "json",
                               "-o", str(out)], cwd=tmp_path, capture_output=True, text=True, timeout=120)
        assert proc.returncode == expected.exit_code, proc.stderr
        assert json.loads(out.read_text())["verdict"] == expected.verdict.value
    assert gatekeeper.check_static(hacked, None).exit_code == 1  # the pair covers both statuses


def test_a_child_forked_while_paused_gets_the_collector_back(tmp_path):
    """The --jobs pool forks before the first report: its workers must collect."""
    result = _python("""
        import gc, os
        from gatekeeper import cli_gc
        cli_gc.own_process()
        with cli_gc.collector_off_until_frozen():
            pid = os.fork()
            if pid == 0:
                os._exit(0 if gc.isenabled() else 7)
            _, status = os.waitpid(pid, 0)
            assert not gc.isenabled()
        print(os.waitstatus_to_exitcode(status))
    """, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "0"
