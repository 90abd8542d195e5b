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
limit. A compile that never ends is still a time-out (GK661, phase 'build'). The compile and
its result are torch's own; the one addition is that a source rewritten with the same bytes
keeps the modification time of the last build (runtime/source_stamps.py), so ninja does not
compile it again in every job. Installed by the trusted worker before the submission is
imported, in the build, checking and timing workers alike (they must look the same to a
submission).
"""

from __future__ import annotations

import functools
import importlib.abc
import sys
from typing import Any, Optional

PHASE = "build"
MODULE = "torch.utils.cpp_extension"


def announce_builds(channel: Any) -> None:
    """Wrap torch's JIT-compile entry now if it is loaded, else as soon as it is imported.
    Importing it here unasked would cost every worker ~0.2 s (it pulls in setuptools), and
    most submissions never compile at run time."""
    module = sys.modules.get(MODULE)
    if module is not None:
        _wrap(module, channel)
        return
    if not any(isinstance(finder, _WrapOnImport) for finder in sys.meta_path):
        sys.meta_path.insert(0, _WrapOnImport(channel))


class _WrapOnImport(importlib.abc.MetaPathFinder):
    """A finder that answers for torch.utils.cpp_extension only: it finds the real module
    through the other finders and wraps its loader, so the module is patched right after it
    runs, before any importer gets it."""

    def __init__(self, channel: Any) -> None:
        self.channel, self.busy = channel, False

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Optional[Any]:
        if fullname != MODULE or self.busy:
            return None
        self.busy = True
        try:
            spec = next((found for finder in sys.meta_path if finder is not self
                         for found in [_find(finder, fullname, path, target)] if found is not None), None)
        finally:
            self.busy = False
        loader = getattr(spec, "loader", None)
        if spec is None or loader is None or not hasattr(loader, "exec_module"):
            return spec
        channel, run = self.channel, loader.exec_module

        def exec_module(module: Any) -> None:
            run(module)
            _wrap(module, channel)

        loader.exec_module = exec_module  # this spec's loader instance only
        return spec


def _find(finder: Any, fullname: str, path: Any, target: Any) -> Optional[Any]:
    find = getattr(finder, "find_spec", None)
    return find(fullname, path, target) if find is not None else None


def _wrap(ext: Any, channel: Any) -> None:
    original = getattr(ext, "_jit_compile", None)
    if original is None or getattr(original, "_gk_build_phase", False):
        return

    @functools.wraps(original)
    def _jit_compile(*args: Any, **kwargs: Any) -> Any:
        interrupted = (channel.current_phase, dict(getattr(channel, "current_data", {}) or {}))
        if interrupted[0] == PHASE:  # a compile inside a compile, or the build job: one phase
            return _compile(original, args, kwargs)
        channel.phase(PHASE)
        try:
            return _compile(original, args, kwargs)
        finally:
            channel.phase(interrupted[0], **interrupted[1])

    _jit_compile._gk_build_phase = True  # type: ignore[attr-defined]
    ext._jit_compile = _jit_compile  # type: ignore[attr-defined]


def _compile(original: Any, args: tuple, kwargs: dict) -> Any:
    """torch's compile, with sources rewritten byte for byte keeping the time of the last
    build (runtime/source_stamps.py): the same extension is not compiled again per job."""
    from gatekeeper.runtime import source_stamps

    found = source_stamps.sources_and_folder(original, args, kwargs)
    if found is not None:
        source_stamps.restore(*found)
    result = original(*args, **kwargs)
    if found is not None:
        source_stamps.record(*found)
    return result
