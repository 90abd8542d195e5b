"""Compiles that a submission starts after its import run under the `build` phase limit.

An honest submission may compile its extension lazily: `load_inline` in `__init__`, in a
closure on the first `forward`, or from a sidecar module it imports late. The build stage
only imports the submission, so those compiles happen in the checking worker, inside the
`init` or `call` phase, whose limits (60 s) are meant for running code. On a busy machine a
cold compile takes longer, and the submission was rejected for a time-out (GK661) that says
nothing about it (seen on an H100 host running 16 checks, 2026-12-05).

So the worker wraps torch's one JIT-compile entry (`torch.utils.cpp_extension._jit_compile`,
behind both `load` and `load_inline`): while it runs, the phase is `build`, limited by
`limits.build_timeout_s`; then the phase it interrupted is announced again, with a fresh
limit. A compile that never ends is still a time-out (GK661, phase 'build'). Nothing else
changes: the compile and its result are torch's own. Installed by the trusted worker before
the submission is imported, in the checking and the timing worker alike (they must look the
same to a submission).
"""

from __future__ import annotations

import functools
from typing import Any

PHASE = "build"


def announce_builds(channel: Any) -> None:
    try:
        import torch.utils.cpp_extension as ext
    except ImportError:
        return
    original = getattr(ext, "_jit_compile", None)
    if original is None or getattr(original, "_gk_build_phase", False):
        return

    @functools.wraps(original)
    def _jit_compile(*args: Any, **kwargs: Any) -> Any:
        interrupted = (channel.current_phase, dict(getattr(channel, "current_data", {}) or {}))
        if interrupted[0] == PHASE:  # a compile inside a compile: one phase
            return original(*args, **kwargs)
        channel.phase(PHASE)
        try:
            return original(*args, **kwargs)
        finally:
            channel.phase(interrupted[0], **interrupted[1])

    _jit_compile._gk_build_phase = True  # type: ignore[attr-defined]
    ext._jit_compile = _jit_compile  # type: ignore[attr-defined]
