"""Whether this machine can possibly give torch a CUDA device, answered in microseconds.

`check --time` used to import torch, build and run every stage before the timing stage
found no GPU (issue 21, item 9). Importing torch to ask costs seconds, and initialising
CUDA in the parent would break the workers it forks, so this looks only at what the
driver exposes: NVIDIA device nodes (/dev/nvidia0, /dev/nvidiactl; containers get them
from the NVIDIA runtime) or WSL2's /dev/dxg, and CUDA_VISIBLE_DEVICES. A "maybe" is
never a refusal: the timing stage still asks torch itself and says so when it cannot.
"""

from __future__ import annotations

import os
from pathlib import Path

NO_GPU = ("--time needs a CUDA GPU, and this machine exposes none ({why}); nothing was built or run. "
          "Run `gatekeeper check --time` on a machine with an NVIDIA GPU, or drop --time to check without timing")


def why_no_gpu() -> str | None:
    """None when a CUDA device may be usable; else the reason none can be."""
    forced = os.environ.get("GATEKEEPER_ASSUME_CUDA")  # tests and odd setups (build/cache.cuda_present)
    if forced in ("0", "1"):
        return None if forced == "1" else "GATEKEEPER_ASSUME_CUDA=0"
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() in ("", "-1"):
        return f"CUDA_VISIBLE_DEVICES={visible!r} hides every device"
    if os.path.exists("/dev/nvidiactl") or os.path.exists("/dev/dxg") or any(Path("/dev").glob("nvidia[0-9]*")):
        return None
    return "no NVIDIA device node under /dev (no driver, or the container was started without GPUs)"
