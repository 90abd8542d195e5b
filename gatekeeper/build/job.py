"""The build worker: imports the submission, which compiles its extensions (load_inline at
module level) into TORCH_EXTENSIONS_DIR. Runs as a sandbox job."""

from __future__ import annotations

from typing import Any

from gatekeeper.problem.shims import install_shims
from gatekeeper.sandbox.loading import load_submission


def build_job(params: dict[str, Any], channel: Any) -> None:
    channel.phase("load")
    install_shims()
    import torch

    channel.send("env", torch=torch.__version__, cuda=torch.cuda.is_available())
    channel.phase("build")
    from gatekeeper.runtime.build_phase import announce_builds

    announce_builds(channel)  # records the sources' stamps (runtime/source_stamps.py) for later jobs
    load_submission(params["submission"])
    channel.send("built")
