"""Branches of a C++ source that pick torch's or a vendor library's computation on the state of
the process rather than on the inputs (GK311).

A check runs the submission in a different process from a benchmark's: a sandbox (no new
privileges, a user and pid namespace, a tmpfs working folder), one thread, /dev/null on stdin,
no gradient mode, the checker's frames on the stack. Code that reads any of that can run its
own kernel where it is checked and the library everywhere else, and no run-time probe sees the
difference. Inputs (shapes, strides, dtypes) and the machine (CPU features, device properties)
are the same in both processes, so a choice made on them is visible to the checks.

Token level, name based and whole file (a C++ source is one translation unit):
- a *process read* is a call of a function that reports the process's identity, privileges,
  environment, files, threads, resource use or callers (`PROCESS_READS`), or `environ`;
- a function of the source is *tainted* when its body makes a process read or calls a tainted
  function; a name is tainted when it is assigned from an expression that is;
- an `if`/`switch` whose condition is tainted is the finding when it is a choice: a library
  call (found by cpp_torch_calls) is reached on one side, and the source's own computation (a
  loop or a kernel launch) but no library call on the other. "Reached" follows calls into the
  source's own functions, and a side that does not return goes on to the rest of the function
  (`if (checked) { own(); return c; } sgemm_(...);`). A table of functions indexed by a
  tainted value (`table[checked](...)` with `table = {lib, own}`) is a choice too. An opt-in
  self-check after the own
  kernel (`if (getenv("VERIFY")) TORCH_CHECK(at::allclose(c, at::matmul(a, b)))`) is no
  choice: the other side computes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, Optional

from gatekeeper.static.cpp_sources import CppSource
from gatekeeper.static.cpp_tokens import match_close

# What differs between a checker's process and a benchmark's on the same machine.
PROCESS_READS = frozenset({
    # identity, privileges, namespaces, sessions
    "prctl", "getuid", "geteuid", "getgid", "getegid", "getresuid", "getresgid", "getgroups", "getpid",
    "getppid", "getsid", "getpgid", "getpgrp", "gettid", "capget", "getlogin", "getlogin_r", "getpwuid",
    # host, limits, resource use, scheduling
    "gethostname", "uname", "getrlimit", "prlimit", "getrusage", "times", "sysinfo", "sched_getaffinity",
    "sched_getcpu", "sched_getscheduler", "getpriority",
    # environment, working folder, files, descriptors
    "getenv", "secure_getenv", "getcwd", "get_current_dir_name", "isatty", "ttyname", "fstat", "stat", "lstat",
    "statx", "fstatat", "statfs", "fstatfs", "statvfs", "fstatvfs", "fcntl", "readlink", "readlinkat",
    "opendir", "access", "faccessat", "open", "openat", "fopen", "ifstream", "getauxval", "dl_iterate_phdr",
    "dladdr", "dlinfo", "syscall",  # a raw system call reads whatever the call above would
    # threads and the interpreter calling in
    "get_num_threads", "omp_get_num_threads", "omp_get_max_threads", "omp_in_parallel", "get_num_interop_threads",
    "PyEval_GetFrame", "PyThreadState_Get", "PyThreadState_GetFrame", "PyFrame_GetBack", "PyEval_GetGlobals",
    "PyEval_GetLocals", "PyImport_GetModuleDict", "PySys_GetObject",
    # autograd and inference modes the harness sets around its calls
    "is_enabled", "is_grad_enabled", "is_inference_mode_enabled", "is_inference",
    # CUDA graph capture: a timed (graph-replayed) call is captured, a checked eager call is not
    # (red team round 13: cuBLAS while capturing, the own kernel otherwise)
    "currentStreamCaptureStatusMayInitCtx", "currentStreamCaptureStatus", "cudaStreamIsCapturing",
    "cudaStreamGetCaptureInfo", "cudaStreamGetCaptureInfo_v2", "cudaStreamGetCaptureInfo_v3", "cuStreamIsCapturing",
    "cuStreamGetCaptureInfo", "cuStreamGetCaptureInfo_v2", "cuStreamGetCaptureInfo_v3", "is_current_stream_capturing",
    # what the host installed in the process: signal dispositions, masks and interval timers (a
    # checker's sampler arms a SIGPROF handler and a profiling timer; red team round 14 asked
    # `sigaction(27, nullptr, &old)` and ran MKL when no handler was there)
    "sigaction", "sigprocmask", "pthread_sigmask", "sigpending", "sigaltstack", "getitimer", "timer_gettime",
})
_PROCESS_NAMES = frozenset({"environ", "__environ"})  # read without a call
PROCESS_WORDS = PROCESS_READS | _PROCESS_NAMES


@dataclass
class ProcessBranch:
    offset: int  # the `if` / `switch`
    read: str  # the process read behind its condition
    library: str  # the library call one side reaches
    library_offset: int


def _tokens_between(tokens: list, start: int, end: int) -> Iterable[int]:
    return range(max(start, 0), min(end, len(tokens)))


class _Taint:
    def __init__(self, source: CppSource) -> None:
        self.tokens = source.tokens
        self.functions = source.functions
        self.names: dict[str, str] = {}  # tainted name -> the process read behind it
        self.calls: dict[str, str] = {}  # tainted function -> the process read behind it
        for _ in range(4):  # a fixpoint: functions and names taint each other
            before = len(self.names) + len(self.calls)
            for fn in self.functions:
                if fn.name not in self.calls:
                    read = self.read_in(fn.body_start, fn.body_end)
                    if read is not None:
                        self.calls[fn.name] = read
            self._assignments()
            if len(self.names) + len(self.calls) == before:
                break

    def read_at(self, i: int) -> Optional[str]:
        tok = self.tokens[i]
        if tok.kind != "ident":
            return None
        nxt = self.tokens[i + 1].text if i + 1 < len(self.tokens) else ""
        prev = self.tokens[i - 1].text if i else ""
        if nxt == "(" or (nxt == "<" and tok.text == "ifstream") or tok.text == "ifstream":
            if tok.text in PROCESS_READS and not (tok.text == "is_enabled" and prev not in ("::", ".", "->")):
                return tok.text
            if tok.text in self.calls and prev not in (".", "->"):
                return self.calls[tok.text]
        if tok.text in _PROCESS_NAMES:
            return tok.text
        if tok.text in self.names and nxt != "=" and prev not in (".", "->", "::"):
            return self.names[tok.text]
        return None

    def read_in(self, start: int, end: int) -> Optional[str]:
        for i in _tokens_between(self.tokens, start, end):
            read = self.read_at(i)
            if read is not None:
                return read
        return None

    def _assignments(self) -> None:
        tokens = self.tokens
        for i, tok in enumerate(tokens):
            # `init(&flag)` with a tainted function: what it writes through the pointer is tainted
            # so is what a process read writes through one (`cudaStreamIsCapturing(s, &status)`, `getrusage(who, &ru)`)
            writer = self.calls.get(tok.text) or (tok.text if tok.text in PROCESS_READS else None)
            if tok.kind == "ident" and writer and i + 1 < len(tokens) and tokens[i + 1].text == "(":
                close = match_close(tokens, i + 1)
                for j in range(i + 2, close):
                    if tokens[j].text == "&" and tokens[j + 1].kind == "ident" and tokens[j + 1].text not in self.names:
                        self.names[tokens[j + 1].text] = writer
            if tok.kind != "punct" or tok.text != "=" or i == 0 or tokens[i - 1].kind != "ident":
                continue
            name = tokens[i - 1].text
            if name in self.names:
                continue
            end = i + 1
            depth = 0
            while end < len(tokens) and not (depth == 0 and tokens[end].text in (";", ",", ")")):
                depth += tokens[end].text in ("(", "[", "{")
                depth -= tokens[end].text in (")", "]", "}")
                end += 1
            read = self.read_in(i + 1, end)
            if read is not None:
                self.names[name] = read


def _statement_end(tokens: list, start: int) -> int:
    """The index of the last token of the statement starting at `start`: a `{...}` block or up
    to its `;` (an `if`/`for` nested without braces is followed to its own end)."""
    if start >= len(tokens):
        return len(tokens) - 1
    if tokens[start].text == "{":
        return match_close(tokens, start)
    if tokens[start].text in ("if", "for", "while", "switch") and start + 1 < len(tokens) and tokens[start + 1].text == "(":
        close = match_close(tokens, start + 1)
        end = _statement_end(tokens, close + 1)
        if tokens[start].text == "if" and end + 1 < len(tokens) and tokens[end + 1].text == "else":
            end = _statement_end(tokens, end + 2)
        return end
    depth = 0
    i = start
    while i < len(tokens):
        text = tokens[i].text
        depth += text in ("(", "[", "{")
        depth -= text in (")", "]", "}")
        if text == ";" and depth <= 0:
            return i
        i += 1
    return len(tokens) - 1


@dataclass
class SourceFacts:
    """What each function of a source does: makes a process read (directly or through others),
    reaches a library call, computes on its own (a loop or a kernel launch)."""

    taint: "_Taint"
    library_at: dict[int, str]
    reaching: dict[str, tuple[str, int]]
    own_at: dict[int, str]
    own: dict[str, tuple[str, int]]


def source_facts(source: CppSource, library_offsets: dict[int, str]) -> SourceFacts:
    tokens = source.tokens
    at_offset = {tok.offset: i for i, tok in enumerate(tokens)}
    library_at = {at_offset[o]: what for o, what in library_offsets.items() if o in at_offset}
    own_at = {j: "own" for fn in source.functions for j in range(fn.body_start, fn.body_end)
              if tokens[j].text in ("for", "while", "<<<")}
    return SourceFacts(_Taint(source), library_at, _reaching(source, library_at), own_at, _reaching(source, own_at))


def _reaching(source: CppSource, targets: dict[int, str]) -> dict[str, tuple[str, int]]:
    """The functions of the source whose body reaches one of `targets` (through others of the source)."""
    found: dict[str, tuple[str, int]] = {}
    for _ in range(4):
        for fn in source.functions:
            if fn.name not in found:
                hit = _reach(source.tokens, fn.body_start, fn.body_end, targets, found)
                if hit is not None:
                    found[fn.name] = hit
    return found


def process_branches(source: CppSource, library_offsets: dict[int, str]) -> list[ProcessBranch]:
    """The branches that choose the library (calls at `library_offsets`: offset -> what) on a
    process read. Empty when the source makes no process read (most sources)."""
    idents = source.by_text["ident"]
    if not library_offsets or not (idents.keys() & PROCESS_WORDS):
        return []
    facts = source_facts(source, library_offsets)
    out = [b for fn in source.functions for b in _choices(source, facts, fn, facts.taint.read_in)]
    out += _table_choices(source, facts.taint, facts.library_at, facts.reaching, facts.own_at, facts.own)
    return out


def parameter_choices(source: CppSource, facts: SourceFacts) -> dict[str, dict[int, ProcessBranch]]:
    """Function name -> {index of a parameter: the choice of the library it decides}: a caller that
    hands the process's state to that parameter makes the choice on the process."""
    tokens = source.tokens
    out: dict[str, dict[int, ProcessBranch]] = {}
    for fn in source.functions:
        for index, param in enumerate(fn.params):
            if not param:
                continue

            def reads(start: int, end: int, name: str = param) -> Optional[str]:
                return name if any(tokens[j].text == name for j in range(start, end)) else None

            found = _choices(source, facts, fn, reads)
            if found:
                out.setdefault(fn.name, {})[index] = found[0]
    return out


def _choices(source: CppSource, facts: SourceFacts, fn: Any,
             reads: Callable[[int, int], Optional[str]]) -> list[ProcessBranch]:
    """The `if`/`switch` of one function whose condition `reads`, and that choose: the library on
    one side, the source's own computation (and no library) on the other."""
    tokens = source.tokens
    library_at, reaching, own_at, own = facts.library_at, facts.reaching, facts.own_at, facts.own
    out: list[ProcessBranch] = []
    for i in range(fn.body_start, fn.body_end):
        if tokens[i].text not in ("if", "switch") or tokens[i + 1].text != "(":
            continue
        close = match_close(tokens, i + 1)
        read = reads(i + 2, close)
        if read is None:
            continue
        then_end = _statement_end(tokens, close + 1)
        sides = [(close + 1, then_end + 1)]
        if then_end + 1 < len(tokens) and tokens[then_end + 1].text == "else":
            else_end = _statement_end(tokens, then_end + 2)
            sides.append((then_end + 2, else_end + 1))
            rest = (else_end + 1, fn.body_end)
        else:
            sides.append((then_end + 1, then_end + 1))  # no else: an empty side
            rest = (then_end + 1, fn.body_end)
        hits, owns = [], []
        for start, end in sides:
            # a side that does not return goes on to the rest of the function
            spans = [(start, end)] if any(tokens[j].text == "return" for j in range(start, end)) \
                else [(start, end), rest]
            hits.append(next((h for a, b in spans if (h := _reach(tokens, a, b, library_at, reaching))), None))
            owns.append(any(_reach(tokens, a, b, own_at, own) for a, b in spans))
        for k in (0, 1):
            if hits[k] is not None and hits[1 - k] is None and owns[1 - k]:
                what, where = hits[k]
                out.append(ProcessBranch(tokens[i].offset, read, what, where))
                break
    return out


def _table_choices(source: CppSource, taint: "_Taint", library_at: dict[int, str], reaching: dict[str, tuple[str, int]],
                   own_at: dict[int, str], own: dict[str, tuple[str, int]]) -> list[ProcessBranch]:
    """`table[pick](...)` with a tainted index into a table of the source's functions, one that
    reaches the library and one that computes on its own: a choice without an `if`."""
    tokens = source.tokens
    tables: dict[str, list[str]] = {}
    for i in range(len(tokens) - 2):  # `NAME[...] = {f, g}` / `NAME = {f, g}`
        if tokens[i].text != "=" or tokens[i + 1].text != "{":
            continue
        j = i - 1
        if tokens[j].text == "]":
            while j > 0 and tokens[j].text != "[":
                j -= 1
            j -= 1
        if j >= 0 and tokens[j].kind == "ident":
            close = match_close(tokens, i + 1)
            tables[tokens[j].text] = [t.text for t in tokens[i + 2:close] if t.kind == "ident"]
    out: list[ProcessBranch] = []
    for name, members in tables.items():
        library = [reaching[m] for m in members if m in reaching]
        computes = [m for m in members if m in own and m not in reaching]
        if not library or not computes:
            continue
        for i in source.by_text["ident"].get(name, ()):
            if i + 1 < len(tokens) and tokens[i + 1].text == "[":
                close = match_close(tokens, i + 1)
                read = taint.read_in(i + 2, close)
                if read is not None and close + 1 < len(tokens) and tokens[close + 1].text == "(":
                    out.append(ProcessBranch(tokens[i].offset, read, library[0][0], library[0][1]))
    return out


def _reach(tokens: list, start: int, end: int, library_at: dict[int, str],
           reaching: dict[str, tuple[str, int]]) -> Optional[tuple[str, int]]:
    for j in range(max(start, 0), min(end, len(tokens))):
        if j in library_at:
            return library_at[j], tokens[j].offset
        tok = tokens[j]
        if tok.kind == "ident" and tok.text in reaching and j + 1 < len(tokens) and tokens[j + 1].text == "(":
            return reaching[tok.text]
    return None


_PY_ENTRIES = frozenset({"PyImport_ImportModule", "PyImport_Import", "PyObject_Call", "PyObject_CallObject",
                         "PyObject_CallFunction", "PyObject_CallMethod", "PyObject_CallFunctionObjArgs",
                         "PyObject_CallMethodObjArgs", "PyObject_Vectorcall", "PyObject_CallOneArg"})


def python_calls(source: CppSource) -> dict[int, str]:
    """Offsets of calls from C++ back into Python (pybind11's `module_::import(...)`, the C API's
    imports and calls) -> what they are: code the source does not hold, as a library is."""
    tokens, idents = source.tokens, source.by_text["ident"]
    out: dict[int, str] = {}
    for name in _PY_ENTRIES & idents.keys():
        for i in idents[name]:
            if i + 1 < len(tokens) and tokens[i + 1].text == "(":
                out[tokens[i].offset] = name
    for i in idents.get("import", ()):
        if i >= 2 and tokens[i - 1].text == "::" and tokens[i - 2].text in ("module_", "module") \
                and i + 1 < len(tokens) and tokens[i + 1].text == "(":
            out[tokens[i].offset] = f"{tokens[i - 2].text}::import"
    return out
