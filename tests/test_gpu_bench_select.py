"""The GPU fixture bench's case selection (bench/gpu_fixtures.py): a later device call goes on
where an earlier one was cut off, re-runs the named cases, and leaves out problems pinned to the
CPU (their workers cannot run a GPU kernel, so a verdict there says nothing about the GPU)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import gpu_fixtures  # noqa: E402


def test_cpu_pinned_problems_are_left_out() -> None:
    assert gpu_fixtures.pinned_to_cpu(ROOT / "fixtures" / "problems" / "kbhard_head_rmsnorm")
    assert not gpu_fixtures.pinned_to_cpu(ROOT / "fixtures" / "problems" / "seed_mean.py")
    problems = {c["problem"] for c in gpu_fixtures.gpu_cases()}
    assert "problems/kbhard_head_rmsnorm" not in problems
    assert "problems/seed_mean.py" in problems


def test_skip_done_and_rerun(tmp_path: Path) -> None:
    cases = gpu_fixtures.gpu_cases()
    first = cases[0]
    second = next(c for c in cases if c["submission"] != first["submission"])  # --rerun names a submission
    done = tmp_path / "gpu_fixtures.jsonl"
    lines = [json.dumps({"case": c["submission"], "problem": c["problem"], "verdict": "pass"}) for c in (first, second)]
    # a run killed mid-write leaves half a line: that case did not finish
    done.write_text("\n".join(lines) + '\n{"case": "' + cases[-1]["submission"] + '", "probl')
    keys = gpu_fixtures.done_keys([str(done)])
    assert keys == {(first["submission"], first["problem"]), (second["submission"], second["problem"])}
    chosen = gpu_fixtures.select(cases, [], keys, [Path(second["submission"]).stem])
    names = [(c["submission"], c["problem"]) for c in chosen]
    assert (first["submission"], first["problem"]) not in names
    assert (second["submission"], second["problem"]) in names
    assert len(chosen) == len(cases) - 1


def test_only_narrows() -> None:
    chosen = gpu_fixtures.select(gpu_fixtures.gpu_cases(), ["seed_honest_generic"], set(), [])
    assert [c["submission"] for c in chosen] == ["submissions/seed_honest_generic.py"]
