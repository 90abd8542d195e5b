"""Which compiled modules are the submission's own: every extension module created from a
file outside the Python installation (load_inline, load, or built by hand), wherever it was
built. The dispatcher recorder (attribution.Recorder) names own calls by module; the CPU
sampler (behaviour.executing) places samples by file."""

from __future__ import annotations

import os
import sys
import sysconfig
from typing import Any


def _system_roots() -> tuple[str, ...]:
    roots = {sys.prefix, sys.base_prefix, sys.exec_prefix}
    for key in ("purelib", "platlib", "stdlib", "platstdlib"):
        path = sysconfig.get_paths().get(key)
        if path:
            roots.add(path)
    return tuple(os.path.realpath(r) + os.sep for r in roots if r)


SYSTEM_ROOTS = _system_roots()


_LOADED: set[str] = set()
LOADED_FILES: set[str] = set()  # the files of those modules (own code wherever it was built)
LOADED_INODES: set[int] = set()  # ... and their inodes when loaded: a file renamed over the path later is another


def _note_inode(path: str) -> None:
    try:
        LOADED_INODES.add(os.stat(path).st_ino)
    except OSError:
        pass
_OWN_CACHE: list[Any] = []  # (sys.modules size, loader count) -> names: realpath costs ms per call


def watch_extension_loads() -> None:
    """Record every compiled module created from a file outside the Python installation.
    load_inline imports its module without entering it in sys.modules, so the loader is the
    one place that sees them all. Installed by the trusted worker before the submission loads."""
    import importlib.machinery

    loader = importlib.machinery.ExtensionFileLoader
    if getattr(loader.create_module, "_gk_watch", False):
        return
    original = loader.create_module

    def create_module(self: Any, spec: Any) -> Any:
        module = original(self, spec)
        origin = getattr(spec, "origin", None) or ""
        if origin and not os.path.realpath(origin).startswith(SYSTEM_ROOTS):
            _LOADED.add(spec.name)
            _LOADED.add(spec.name.rsplit(".", 1)[-1])
            LOADED_FILES.add(origin)
            _note_inode(origin)
        return module

    create_module._gk_watch = True  # type: ignore[attr-defined]
    loader.create_module = create_module  # type: ignore[method-assign]
    _watch_ctypes_loads()


def _watch_ctypes_loads() -> None:
    """Libraries the submission loads itself (`ctypes.CDLL`, and through it
    `torch.ops.load_library`, load_inline's `is_python_module=False`) are its own too. A library
    the dynamic linker pulls in as a dependency is not: a vendor library copied beside the
    submission and linked to its extension is still the vendor's code (red team round 6, h08)."""
    import ctypes

    cdll = ctypes.CDLL
    if getattr(cdll.__init__, "_gk_watch", False):
        return
    original = cdll.__init__

    def init(self: Any, name: Any, *args: Any, **kwargs: Any) -> None:
        original(self, name, *args, **kwargs)
        if isinstance(name, (str, os.PathLike)) and os.sep in os.fspath(name):
            path = os.fspath(name)
            if not os.path.realpath(path).startswith(SYSTEM_ROOTS):
                LOADED_FILES.add(path)
                _note_inode(path)

    init._gk_watch = True  # type: ignore[attr-defined]
    cdll.__init__ = init  # type: ignore[method-assign]


def own_modules() -> set[str]:
    """Names of loaded compiled modules that do not belong to the Python installation: the
    submission's extensions (load_inline, load, or built by hand in the working directory)."""
    key = (len(sys.modules), len(_LOADED))
    if _OWN_CACHE and _OWN_CACHE[0] == key:
        return set(_OWN_CACHE[1])
    names = set(_LOADED)
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None)
        if not isinstance(path, str) or not path.endswith((".so", ".pyd")):
            continue
        if not os.path.realpath(path).startswith(SYSTEM_ROOTS):
            names.add(name.rsplit(".", 1)[-1])
            names.add(name)
    _OWN_CACHE[:] = [key, frozenset(names)]
    return names


def own_extension_files() -> list[str]:
    """The files of those modules, for the sampler: load_inline's are not in sys.modules."""
    out = list(LOADED_FILES)
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if isinstance(path, str) and path.endswith((".so", ".pyd")) and not os.path.realpath(path).startswith(SYSTEM_ROOTS):
            out.append(path)
    return out
