"""The C++ stream vocabulary of GK501 and token tests on it: which calls create, hand out,
switch to, name the current stream or wait for one, whether a function returns a stream it
holds, and whether a stream variable's token is a use. Not a rule file: it defines no rule
with a `code`; nothing here reports."""

from __future__ import annotations

from typing import Sequence

from gatekeeper.analyses.stream_support import call_args, enclosing_call, statement_start
from gatekeeper.static.cpp_functions import CppFunction
from gatekeeper.static.cpp_tokens import Token

CREATE = frozenset({"cudaStreamCreate", "cudaStreamCreateWithFlags", "cudaStreamCreateWithPriority"})
# Expressions that hand out a stream other than the current one.
ACQUIRE = frozenset({"getStreamFromPool", "getStreamFromExternal", "cudaStreamPerThread"})
# Calls that make a stream current for what follows.
SWITCH = frozenset({"setCurrentCUDAStream", "CUDAStreamGuard", "OptionalCUDAStreamGuard", "CUDAMultiStreamGuard"})
CURRENT = frozenset({"getCurrentCUDAStream", "getDefaultCUDAStream"})
SYNC = frozenset({"cudaDeviceSynchronize", "device_synchronize", "cudaStreamSynchronize", "stream_synchronize",
                  "cudaStreamWaitEvent", "cudaEventSynchronize", "synchronize", "block"})
# The legacy default stream and the casts that spell it.
DEFAULT_STREAMS = frozenset({"0", "nullptr", "NULL", "cudaStreamLegacy", "cudaStream_t", "static_cast",
                             "reinterpret_cast"})
NOT_USES = frozenset({"cudaStreamDestroy", "cudaStreamQuery", "cudaStreamGetPriority", "cudaStreamGetFlags"})
_TESTS = frozenset({"if", "while", "for", "switch", "sizeof", "assert", "TORCH_CHECK"})


def is_join(tokens: Sequence[Token], j: int, identities: set[str]) -> bool:
    text = tokens[j].text
    if tokens[j].kind != "ident" or text not in SYNC:
        return False
    args, _ = call_args(tokens, j)
    first = {t.text for t in args[0]} if args else set()
    if text in ("cudaDeviceSynchronize", "device_synchronize", "cudaEventSynchronize"):
        return True
    if text in ("cudaStreamSynchronize", "stream_synchronize") and first & identities:
        return True
    if text == "cudaStreamWaitEvent" and args and not first & identities:
        return True  # the current stream waits for an event
    if text in ("synchronize", "block") and j > 0 and tokens[j - 1].text in (".", "->"):
        receiver = tokens[j - 2].text if j >= 2 else ""
        if text == "synchronize" and receiver in identities:
            return True
        if text == "block" and not first & identities:
            return True
    return False


def called(tokens: Sequence[Token], i: int) -> bool:
    return i + 1 < len(tokens) and tokens[i + 1].text == "("


def returns_any(tokens: Sequence[Token], fn: CppFunction, names: set[str]) -> bool:
    return any(tokens[k].text == "return" and tokens[k + 1].text in names and tokens[k + 2].text == ";"
               for k in range(fn.body_start, fn.body_end - 2))


def is_use(tokens: Sequence[Token], i: int) -> bool:
    """A stream variable handed to a launch or a call, or used as a receiver; not its
    declaration (`cudaStream_t s;`) nor a test (`if (!s)`, `s == nullptr`)."""
    prev = tokens[i - 1] if i > 0 else None
    nxt = tokens[i + 1] if i + 1 < len(tokens) else None
    if prev is not None and prev.text == "return":
        return False  # handing the stream to a caller; the caller's use is what counts
    if prev is not None and prev.kind == "ident" and (
            nxt is None or nxt.text in (";", "=", ",", "[", "{")):
        return False
    if (prev is not None and prev.text == "!") or (nxt is not None and nxt.text in ("==", "!=", "=")):
        return False
    return enclosing_call(tokens, i) not in _TESTS


def statement_has(tokens: Sequence[Token], index: int, words: frozenset[str]) -> bool:
    for j in range(statement_start(tokens, index), index):
        if tokens[j].text in words:
            return True
    return False
