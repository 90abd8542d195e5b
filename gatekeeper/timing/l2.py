"""Persisting L2 lines (issue 11, item 4): before each timed call, lines a submission pinned
with an access-policy window or a persisting carve-out are made normal again, so the flush
that follows evicts them like any other line.

Through the CUDA driver API (libcuda, one copy per system, acting on the context current on
the calling thread, which is the primary context torch uses):
  cuCtxResetPersistingL2Cache()                        persisting lines -> normal
  cuStreamSetAttribute(stream, ACCESS_POLICY_WINDOW, 0 bytes)   the timing stream's window off
  cuCtxGetLimit(PERSISTING_L2_CACHE_SIZE)              recorded: did the submission set one?
Every call is guarded: on a machine without libcuda (CPU) `L2Reset.available` is False and
nothing is called. Bound when the timing method is imported, before any submission code.
"""

from __future__ import annotations

import ctypes
from typing import Optional

_CU_LIMIT_PERSISTING_L2_CACHE_SIZE = 0x06
_CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW = 1


class _AccessPolicyWindow(ctypes.Structure):
    _fields_ = [("base_ptr", ctypes.c_void_p), ("num_bytes", ctypes.c_size_t), ("hitRatio", ctypes.c_float),
                ("hitProp", ctypes.c_int), ("missProp", ctypes.c_int)]


class _StreamAttrValue(ctypes.Union):
    # CUstreamAttrValue / CUlaunchAttributeValue: a 64-byte union; only the window is used.
    _fields_ = [("accessPolicyWindow", _AccessPolicyWindow), ("pad", ctypes.c_char * 64)]


def _libcuda() -> Optional[ctypes.CDLL]:
    for name in ("libcuda.so.1", "libcuda.so"):
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    return None


class L2Reset:
    """`reset(stream_handle)` before the flush; `persisting_limit()` for the report."""

    def __init__(self) -> None:
        self.lib = None
        self.errors: list[str] = []
        lib = _libcuda()
        if lib is None:
            return
        try:
            self._reset = lib.cuCtxResetPersistingL2Cache
            self._get_limit = lib.cuCtxGetLimit
            self._set_attr = lib.cuStreamSetAttribute
        except AttributeError:  # a driver older than CUDA 11
            return
        self._reset.restype = ctypes.c_int
        self._get_limit.argtypes = [ctypes.POINTER(ctypes.c_size_t), ctypes.c_int]
        self._set_attr.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(_StreamAttrValue)]
        self._empty = _StreamAttrValue()  # zero bytes: no window
        self.lib = lib

    @property
    def available(self) -> bool:
        return self.lib is not None

    def _note(self, what: str, code: int) -> None:
        if code != 0 and len(self.errors) < 5:
            self.errors.append(f"{what} returned CUDA error {code}")

    def reset(self, stream_handle: Optional[int] = None) -> None:
        if self.lib is None:
            return
        self._note("cuCtxResetPersistingL2Cache", self._reset())
        if stream_handle is not None:
            self._note("cuStreamSetAttribute", self._set_attr(ctypes.c_void_p(stream_handle),
                                                              _CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW,
                                                              ctypes.byref(self._empty)))

    def persisting_limit(self) -> Optional[int]:
        """The context's persisting-L2 carve-out in bytes (0 unless someone set it), or None."""
        if self.lib is None:
            return None
        value = ctypes.c_size_t(0)
        code = self._get_limit(ctypes.byref(value), _CU_LIMIT_PERSISTING_L2_CACHE_SIZE)
        self._note("cuCtxGetLimit", code)
        return int(value.value) if code == 0 else None
