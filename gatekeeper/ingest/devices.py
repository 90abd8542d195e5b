"""How many workers, and which GPU each one sees."""

from __future__ import annotations

import importlib.util
import os

EXECUTING_STAGES = ("behaviour", "timing")


def gpu_count(stages: str) -> int:
    """GPUs visible to this process; 0 for static/build work or without torch. torch is
    imported only here, only when the stages run code on a device."""
    if stages not in EXECUTING_STAGES or importlib.util.find_spec("torch") is None:
        return 0
    import warnings

    try:
        with warnings.catch_warnings():  # torch warns at import about optional extras (numpy)
            warnings.simplefilter("ignore")
            import torch

        return int(torch.cuda.device_count())
    except Exception:  # a broken driver means no GPU to pin, not a failed batch
        return 0


def worker_envs(jobs: int, gpus: int) -> list[dict[str, str]]:
    """One environment per worker: with GPUs, one worker per GPU, each pinned to it by
    CUDA_VISIBLE_DEVICES (indices into what this process sees); otherwise `jobs` workers."""
    if gpus <= 0:
        return [{} for _ in range(jobs)]
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    ids = [d.strip() for d in visible.split(",")][:gpus] if visible else [str(i) for i in range(gpus)]
    return [{"CUDA_VISIBLE_DEVICES": device} for device in ids]
