"""A ReLU problem of a chosen size, written to a file: the large-problem checks (issue 22
item 1) in tests/test_large_problems.py and bench/bench_large_problem_repeat.py."""

from __future__ import annotations

from pathlib import Path

SOURCE = '''"""ReLU over a float32 vector of {mib} MiB (written by tests/large_problem_support.py)."""
import torch
import torch.nn as nn

n = {numel}


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


def get_inputs():
    return [torch.randn(n)]


def get_init_inputs():
    return []
'''


def write_relu_problem(folder: Path, mib: int) -> Path:
    """relu_<mib>mib.py with its sidecar (CPU; jittered down only above the large-problem size)."""
    path = Path(folder) / f"relu_{mib}mib.py"
    path.write_text(SOURCE.format(mib=mib, numel=mib * (1 << 20) // 4), "utf-8")
    path.with_suffix(".toml").write_text('device = "cpu"\ndtype = "float32"\n', "utf-8")
    return path


class CpuBurner:
    """A background process that keeps one core busy (the "under load" of issue 22), ended
    by its own pid. `nice=19` makes it take only CPU time nothing else wants: the machine
    still has no idle core, but the burner no longer halves the speed of whatever else runs
    (the other pytest-xdist worker, for the minutes of the largest problems)."""

    def __init__(self, nice: int = 0) -> None:
        self.nice = nice

    def __enter__(self) -> "CpuBurner":
        import os
        import subprocess
        import sys

        nice = self.nice
        self.proc = subprocess.Popen([sys.executable, "-c", "while True: pass"],
                                     preexec_fn=(lambda: os.nice(nice)) if nice else None)
        return self

    def __exit__(self, *exc: object) -> None:
        self.proc.kill()
        self.proc.wait()
