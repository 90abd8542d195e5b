"""Test markers (registered in pyproject.toml): `slow` (sandboxes, subprocesses, builds),
`chromium` (headless Chromium), `gpu` (a CUDA GPU). `python -m pytest -m "not slow"` runs
the rule and static tests alone. Tests marked `gpu` are skipped where no CUDA GPU is visible."""

from __future__ import annotations

import pytest


def _has_cuda_gpu() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    gpu_items = [item for item in items if item.get_closest_marker("gpu")]
    # Only look for a GPU (and import torch) when a gpu test was collected.
    if gpu_items and not _has_cuda_gpu():
        skip = pytest.mark.skip(reason="needs a CUDA GPU; none is visible on this machine")
        for item in gpu_items:
            item.add_marker(skip)
