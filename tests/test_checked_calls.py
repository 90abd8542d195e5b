"""Checked calls look like every other call (issue 22 item 2): the worker has no interpreter
flag fingerprint, the recorder runs on a secret subset of the scheduled calls, and the cheap
checks (aliasing, mutation, threads) run on every call. The hacked/honest fixture pairs
(fixtures/manifest/behaviour.toml, checked_*) run through tests/test_fixtures.py."""

from __future__ import annotations

import pytest

from gatekeeper.behaviour.schedule_checks import MIN_RECORDED, judge_calls, recorded_indices
from gatekeeper.sandbox import run_job

FLAGS = """
import sys, os
result = {"isolated": sys.flags.isolated, "ignore_environment": sys.flags.ignore_environment,
          "no_user_site": sys.flags.no_user_site, "safe_path": sys.flags.safe_path,
          "script_dir_on_path": any(os.path.isfile(os.path.join(p or '.', 'worker.py')) and
                                    os.path.isfile(os.path.join(p or '.', 'spill.py')) for p in sys.path),
          "python_env": sorted(k for k in os.environ if k.startswith('PYTHON'))}
"""


def _run(code: str, env=None):
    return run_job("gatekeeper.sandbox.selftest:run_code", {"code": code}, timeouts={"call": 60},
                   default_timeout_s=60, env=env)


def test_the_worker_runs_like_a_plain_python_script():
    result = _run(FLAGS)
    assert result.status == "ok", (result.detail, result.stderr_tail)
    flags = result.first("result")["value"]
    # What `python -I` used to show a submission: all off now, as under a user's harness.
    assert flags["isolated"] == 0 and flags["ignore_environment"] == 0
    assert flags["no_user_site"] == 0 and flags["safe_path"] == 0
    # What -I protected, kept by other means: the sandbox folder is not importable, and the
    # environment holds only the allowlisted PYTHON* variables.
    assert flags["script_dir_on_path"] is False
    assert set(flags["python_env"]) <= {"PYTHONHASHSEED", "PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED"}


def test_a_python_variable_outside_the_allowlist_is_refused(tmp_path):
    result = _run("result = 1", env={"PYTHONPATH": str(tmp_path)})
    assert result.status != "ok" and result.first("result") is None
    assert "PYTHONPATH" in result.stderr_tail


def test_recorded_calls_are_a_secret_subset_of_the_schedule():
    indices = list(range(200))
    first, again, other = (recorded_indices(seed, indices) for seed in (11, 11, 12))
    assert first == again  # reproducible from the seed (--seed)
    assert first != other  # and different for another seed
    assert 40 <= len(first) <= 60 and not first >= set(range(60))  # spread, not the first calls
    assert len(recorded_indices(5, list(range(6)))) == MIN_RECORDED


def _call(index, **kw):
    base = {"kind": "schedule-call", "index": index, "aliases": [], "mutated": [],
            "threads_before": {"python_threads": 1, "os_threads": 3, "children": 0},
            "threads_after": {"python_threads": 1, "os_threads": 3, "children": 0}}
    base.update(kw)
    return base


def _findings(messages, nominal=None):
    found = {}
    judge_calls(messages, nominal or {}, lambda code, trial, evidence, **f: found.setdefault(code, f))
    return found


def test_a_shortcut_on_any_scheduled_call_is_found():
    calls = [_call(i) for i in range(40)]
    calls[33] = _call(33, aliases=["input 0"], mutated=[0])
    calls[37] = _call(37, threads_after={"python_threads": 2, "os_threads": 4, "children": 0})
    found = _findings(calls)
    assert set(found) == {"GK620", "GK625", "GK645"}
    assert "scheduled call 33" in found["GK620"]["what"] and "Python thread" in found["GK645"]["what"]


def test_what_the_reference_itself_does_is_allowed_on_scheduled_calls():
    calls = [_call(i, aliases=["input 1"], mutated=[1]) for i in range(10)]
    assert _findings(calls, {"aliased_inputs": [1], "mutated": [1]}) == {}
    assert set(_findings(calls)) == {"GK620", "GK625"}
