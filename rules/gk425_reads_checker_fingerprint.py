from __future__ import annotations

from typing import Optional

import libcst as cst

from gatekeeper.report import Category, Confidence, Severity
from gatekeeper.analyses.cpp_source import cpp_idents
from gatekeeper.analyses.forward_reads import module_targets, reaches_forward
from gatekeeper.analyses.harness_support import UseRule, in_main_guard, resolve, use_verb
from gatekeeper.static.cpp_sources import CppSource
from gatekeeper.static.examples import Invalid, Valid, snippet

# What each name tells a submission about the process it runs in. Reading any of them has
# no use in computing a kernel's output; their only use is telling a checked call (a
# recorder, a profiler hook, an isolated interpreter) from a timed one.
_INTERPRETER = "the interpreter's start-up flags (a checker's worker may run `python -I`)"
_HOOK = "whether a profile or trace hook is installed (a checker records calls with one)"
_DISPATCH = "torch's thread-local dispatch state (a checker records ops through a Python dispatch mode)"
_PROFILER = "whether torch's profiler is recording"
_DETERMINISM = "torch's deterministic-algorithms flag"
_SAMPLER = "whether a sampling profiler is armed (a checker samples the program counter with SIGPROF and ITIMER_PROF)"
_TIMERS = "the process's interval timers (a checker's sampling profiler arms one)"
_ARGV = "the command line that started the process (the harness's worker or timing script)"
_PROGRAM = "the program that started the process (the harness's worker or timing script)"
_OBSERVER = ("whether torch's profiler or a RecordFunction observer is installed (a checker records the ops of "
             "the calls it checks with one)")
_CUPTI = "whether another CUPTI subscriber (a profiler, a checker's kernel tracer) is attached"
_OBJECTS = "the shared objects loaded in the process (a checker loads its own profiling and recording libraries)"
WHAT: dict[str, str] = {
    "sys.flags": _INTERPRETER, "sys._xoptions": _INTERPRETER,
    "sys.gettrace": _HOOK, "sys.getprofile": _HOOK, "threading.gettrace": _HOOK, "threading.getprofile": _HOOK,
    "torch._C._dispatch_tls_local_include_set": _DISPATCH, "torch._C._dispatch_tls_local_exclude_set": _DISPATCH,
    "torch._C._dispatch_tls_is_dispatch_key_included": _DISPATCH,
    "torch._C._dispatch_tls_is_dispatch_key_excluded": _DISPATCH,
    "torch._C._is_torch_function_mode_enabled": _DISPATCH, "torch._C._is_torch_function_enabled": _DISPATCH,
    "torch._C._is_torch_function_all_disabled": _DISPATCH, "torch._C._get_dispatch_mode": _DISPATCH,
    "torch._C._len_torch_dispatch_stack": _DISPATCH, "torch._C._get_dispatch_stack_at": _DISPATCH,
    "torch._C._len_torch_function_stack": _DISPATCH, "torch._C._get_function_stack_at": _DISPATCH,
    "torch._C._dispatch_keys": _DISPATCH, "torch._C._meta_in_tls_dispatch_include": _DISPATCH,
    "torch._C._autograd._profiler_enabled": _PROFILER, "torch.autograd._profiler_enabled": _PROFILER,
    "torch.autograd.profiler._is_profiler_enabled": _PROFILER,
    "torch.are_deterministic_algorithms_enabled": _DETERMINISM,
    "torch.is_deterministic_algorithms_warn_only_enabled": _DETERMINISM,
    "torch._C._get_deterministic_algorithms": _DETERMINISM,
    "torch._C._get_deterministic_algorithms_warn_only": _DETERMINISM,
    "torch.get_deterministic_debug_mode": _DETERMINISM, "torch._C._get_deterministic_debug_mode": _DETERMINISM,
    "torch.utils.deterministic.fill_uninitialized_memory": _DETERMINISM,
    "torch._C._get_deterministic_fill_uninitialized_memory": _DETERMINISM,
    "torch.utils._python_dispatch._get_current_dispatch_mode": _DISPATCH,
    "torch.utils._python_dispatch._get_current_dispatch_mode_stack": _DISPATCH,
    "torch.utils._python_dispatch.is_in_torch_dispatch_mode": _DISPATCH,
    "torch.overrides._get_current_function_mode": _DISPATCH, "torch.overrides._get_current_function_mode_stack": _DISPATCH,
    "torch.overrides.is_in_torch_function_mode": _DISPATCH, "torch._C._get_torch_dispatch_mode": _DISPATCH,
    "torch._C._dispatch_tls_local_dispatch_key_set": _DISPATCH,
    "signal.SIGPROF": _SAMPLER, "signal.ITIMER_PROF": _SAMPLER, "signal.ITIMER_VIRTUAL": _SAMPLER,
    "signal.SIGVTALRM": _SAMPLER, "signal.Signals.SIGPROF": _SAMPLER, "signal.Signals.SIGVTALRM": _SAMPLER,
    "signal.getitimer": _TIMERS, "signal.setitimer": _TIMERS,
    # read only when the value reaches the forward path (see _emit)
    "sys.argv": _ARGV, "sys.orig_argv": _ARGV,
}
_LIKELY = (_DETERMINISM, _TIMERS)
# The same state read from C++ (ATen / c10 / CPython spellings).
CPP_WHAT: dict[str, str] = {
    "tls_is_dispatch_key_included": _DISPATCH, "tls_is_dispatch_key_excluded": _DISPATCH,
    "tls_local_dispatch_key_set": _DISPATCH, "TorchDispatchModeTLS": _DISPATCH,
    "PythonTorchFunctionTLS": _DISPATCH, "PythonDispatcherTLS": _DISPATCH, "torch_function_mode_enabled": _DISPATCH,
    "c_profilefunc": _HOOK, "c_tracefunc": _HOOK, "c_profileobj": _HOOK, "c_traceobj": _HOOK,
    "PyEval_GetProfile": _HOOK, "PyEval_GetTrace": _HOOK,  # hypothetical spellings, cheap to list
    "Py_IsolatedFlag": _INTERPRETER, "Py_GETENV": _INTERPRETER,
    "deterministicAlgorithms": _DETERMINISM, "deterministicAlgorithmsWarnOnly": _DETERMINISM,
    "deterministicFillUninitializedMemory": _DETERMINISM, "deterministicCuDNN": _DETERMINISM,
    "dispatch_mode_enabled": _DISPATCH,
    "SIGPROF": _SAMPLER, "ITIMER_PROF": _SAMPLER, "ITIMER_VIRTUAL": _SAMPLER, "SIGVTALRM": _SAMPLER,
    "getitimer": _TIMERS, "setitimer": _TIMERS,
    "dl_iterate_phdr": _OBJECTS, "dlinfo": _OBJECTS, "_r_debug": _OBJECTS,
    # torch's op observers and profiler (red team round 12: `RecordFunction span(...); span.isActive()`
    # picked the own kernel while recorded and torch's otherwise); `isActive` counts on a RecordFunction
    "hasCallbacks": _OBSERVER, "hasGlobalCallbacks": _OBSERVER, "hasThreadLocalCallbacks": _OBSERVER,
    "isRecordFunctionEnabled": _OBSERVER, "checkRecordAllFunctions": _OBSERVER, "shouldRunRecordFunction": _OBSERVER,
    "getStepCallbacks": _OBSERVER, "getStepCallbacksUnlessEmpty": _OBSERVER, "ThreadLocalDebugInfo": _OBSERVER,
    "profilerEnabled": _OBSERVER, "isProfilerEnabledInMainThread": _OBSERVER, "profilerType": _OBSERVER,
    "getProfilerConfig": _OBSERVER, "ProfilerStateBase": _OBSERVER, "isActive": _OBSERVER,
    "cuptiSubscribe": _CUPTI, "cuptiGetCallbackState": _CUPTI, "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED": _CUPTI,
}
_CPP_NAMES = frozenset(CPP_WHAT)
# A profiling signal named by its number (Linux: SIGVTALRM 26, SIGPROF 27) is that signal, and
# `sigaction(27, nullptr, &old)` asks whether a sampler's handler is installed (red team round 14).
_SIGNAL_QUERIES = frozenset({"sigaction", "signal", "sigismember", "sigaddset"})
_PROFILING_SIGNALS = {26: "SIGVTALRM", 27: "SIGPROF"}


def _numbered_profiling_signal(source: CppSource, i: int) -> Optional[str]:
    """`sigaction(27, ...)`, `sigismember(&set, 27)`: the profiling signal a literal number names."""
    tokens = source.tokens
    if i + 1 >= len(tokens) or tokens[i + 1].text != "(" or (i and tokens[i - 1].text in (".", "->")):
        return None
    depth, j = 0, i + 1
    while j < len(tokens) and j < i + 12:
        text = tokens[j].text
        depth += text == "("
        depth -= text == ")"
        if depth == 0:
            return None
        if depth == 1 and tokens[j].kind == "number" and tokens[j - 1].text in ("(", ",") \
                and j + 1 < len(tokens) and tokens[j + 1].text in (",", ")"):
            named = _PROFILING_SIGNALS.get(tokens[j].int_value or -1)
            if named:
                return named
        j += 1
    return None


def _record_function_read(source: CppSource, i: int) -> bool:
    """`span.isActive()` / `rf->isActive()` in a source that builds a `RecordFunction`: whether
    an observer is installed. (`isActive` of the source's own types is its own business.)"""
    tokens = source.tokens
    return ("RecordFunction" in source.by_text["ident"] and i > 0 and tokens[i - 1].text in (".", "->", "::")
            and i + 1 < len(tokens) and tokens[i + 1].text == "(")


class ReadsCheckerFingerprint(UseRule):
    """The submission reads state that differs between a checked call and a timed call:
    the interpreter's flags (`sys.flags.isolated`, `sys._xoptions`), the profile or trace
    hook (`sys.getprofile()`, `sys.gettrace()`, `threading.getprofile()`), torch's
    thread-local dispatch state (`torch._C._dispatch_tls_local_include_set()`,
    `torch._C._dispatch_tls_is_dispatch_key_included(...)`,
    `torch._C._is_torch_function_mode_enabled()`, `torch._C._get_dispatch_mode(...)`,
    the dispatch-mode stack length), the profiler's on/off state, or the
    deterministic-algorithms flag; from Python through any alias (`from sys import
    getprofile as gp`, `getattr(sys, "flags")`), or from C++ (`c10::impl::
    tls_is_dispatch_key_included`, `TorchDispatchModeTLS`, `PyThreadState::c_profilefunc`,
    `at::globalContext().deterministicAlgorithms()`), including whether torch's op observers or
    profiler are on (`at::RecordFunction rf(...); rf.isActive()`, `at::hasCallbacks()`,
    `at::hasGlobalCallbacks()`, `c10::ThreadLocalDebugInfo`, `torch::autograd::profiler::
    profilerEnabled()`, `isProfilerEnabledInMainThread()`) and CUPTI's subscriber state
    (`cuptiSubscribe`'s return code says whether a profiler or tracer holds CUPTI).

    Why it games the benchmark: a checker records the ops of the calls it checks (a Python
    dispatch mode, a profile hook) and runs its workers in an isolated interpreter. A
    submission that can see these behaves honestly only while checked, and takes a
    shortcut (an approximate path, torch's GEMM, an aliased output, a cached result) on
    every call that is only timed. None of this state is an input of the problem, so a
    kernel has no reason to read it.

    The sampling profiler a checker runs is read the same way: the SIGPROF handler
    (`sigaction(SIGPROF, nullptr, &old)`, also by its number, `sigaction(27, nullptr, &old)`,
    `signal.getsignal(signal.SIGPROF)`) or the
    profiling timer (`getitimer(ITIMER_PROF, &t)`, `signal.getitimer(signal.ITIMER_PROF)`).
    So is the program that started the process when the value reaches the forward path:
    `sys.argv[0]` (or `sys.orig_argv[0]`) read in a function the call runs, or at import into
    a module-level name that such a function reads (`_CHECKED = sys.argv[0].endswith(
    "worker.py")`). `/proc/self/cmdline` is GK443 and `__main__.__file__` GK423.

    Confidence: certain for the interpreter flags, hooks, dispatch state, profiler state,
    SIGPROF / ITIMER_PROF and the program name. `likely` (a warning under `default`,
    confirmed by GK676) for the deterministic-algorithms flag (torch documents it for
    picking a deterministic kernel, and a submission may honour it), for interval timers
    not named as profiling ones (`getitimer(ITIMER_REAL, ...)`, a self-imposed timeout), and
    for the rest of the command line stored at import and read by the forward path
    (`DEBUG = "--debug" in sys.argv`, a debug switch); the command line read inside the
    forward path's branches is GK110's.

    Not flagged: the GK421 hooks (`sys.settrace`, `sys.setprofile`, `sys.monitoring`) and
    the GK521 dispatch modes (`torch.utils._python_dispatch`, `torch.overrides`), which
    those rules report; setting the deterministic flag (`torch.use_deterministic_algorithms(
    True)`); `sys.version_info`, `sys.platform`, `torch.version.cuda` (the build, not the
    checker); these names in comments and strings; a `RecordFunction` built only to name a range (`RECORD_FUNCTION(
    "gemm", ...)`, `rf.before("gemm")`) and never asked `isActive()`; `isActive()` of the source's own types; `sys.argv` under `if __name__ ==
    "__main__":` or read at import into names the forward path never reads (a CLI self-test).
    """

    code = "GK425"
    name = "ReadsCheckerFingerprint"
    category = Category.INTROSPECTION
    severity = Severity.ERROR
    confirmed_by = "GK676"
    summary = "reads state that tells a checked call from a timed one (interpreter flags, profile hook, dispatch TLS)"
    message = ("`{name}` is {verb}: it reveals {what}, which differs between the calls a checker records and the "
               "calls it only times, so the submission can behave honestly only while checked.")
    hint = (
        "Remove the read. Compute the output the same way on every call, from the inputs alone; "
        "nothing about the process (flags, hooks, dispatch modes, profilers) may choose the path."
    )
    NAMES = tuple(WHAT)
    VALID = [
        Valid(snippet("""
            import sys, torch
            if sys.version_info < (3, 9):
                raise RuntimeError('needs 3.9')
            torch.use_deterministic_algorithms(False)
            flags = ['-O3']  # sys.flags is not read here
        """)),
        Valid(snippet("""
            src = r'''
            torch::Tensor f(torch::Tensor x) { return x.contiguous(); }  // no TLS here
            '''
        """)),
    ]
    INVALID = [
        # walking the loaded shared objects for the checker's own libraries
        Invalid(snippet("""
            src = r'''
            #include <link.h>
            static int seen(struct dl_phdr_info* info, size_t, void* found) { return 0; }
            torch::Tensor f(torch::Tensor x) {
              bool found = false;
              dl_iterate_phdr(seen, &found);
              return found ? own(x) : at::mm(x, x);
            }
            '''
        """), line=6, message="dl_iterate_phdr"),
        Invalid(snippet("""
            import sys
            class ModelNew:
                def forward(self, x):
                    if sys.getprofile() is not None or sys.flags.isolated:
                        return exact(x)
                    return fast(x)
        """), line=4, message="`sys.getprofile` is called: it reveals whether a profile or trace hook is installed"),
        Invalid(snippet("""
            import torch
            _C = torch._C
            def checked():
                return _C._dispatch_tls_is_dispatch_key_included(_C.DispatchKey.Python)
        """), line=4, message="torch's thread-local dispatch state"),
        Invalid(snippet("""
            import sys
            ISO = getattr(sys, 'flags').isolated
        """), line=2, message="`sys.flags` is read: it reveals the interpreter's start-up flags"),
        Invalid(snippet("""
            from threading import getprofile as gp
            def hooked():
                return gp() is not None
        """), line=3, message="`threading.getprofile` is called"),
        Invalid(snippet("""
            src = r'''
            #include <c10/core/impl/LocalDispatchKeySet.h>
            bool checked() { return c10::impl::tls_is_dispatch_key_included(c10::DispatchKey::Python); }
            '''
        """), line=3, message="`tls_is_dispatch_key_included` is read: it reveals torch's thread-local dispatch state"),
    ]

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._argv: list[tuple[cst.CSTNode, str, bool, str, Optional[set[str]]]] = []

    def describe(self, qual: str, entry: str, node: cst.CSTNode) -> Optional[tuple[str, Optional[Severity]]]:
        if WHAT[entry] is _ARGV:
            return None  # decided in finish(), by where the value goes
        return self.message.format(name=entry, verb=use_verb(self.ctx, node), what=WHAT[entry]), None

    def _emit(self, node: cst.CSTNode, qual: str, entry: str) -> None:
        if WHAT.get(entry) is _ARGV:
            self._argv_read(node, entry)
            return
        if WHAT.get(entry) is _TIMERS and self._names_sampler(node):
            return  # `signal.getitimer(signal.ITIMER_PROF)`: the argument is the finding
        if WHAT.get(entry) in _LIKELY:
            # torch documents this flag for choosing a deterministic kernel: a run-time question
            message = self.message.format(name=entry, verb=use_verb(self.ctx, node), what=WHAT[entry])
            self._used = True
            self.report(node, message, evidence={"name": qual}, confidence=Confidence.LIKELY)
            return
        super()._emit(node, qual, entry)

    def _names_sampler(self, node: cst.CSTNode) -> bool:
        call = self.ctx.parent(node)
        if type(call) is not cst.Call or call.func is not node:
            return False
        return any(WHAT.get(resolve(self.ctx, a.value) or "") is _SAMPLER for a in call.args)

    def _argv_read(self, node: cst.CSTNode, entry: str) -> None:
        if in_main_guard(self.ctx, node):
            return
        parent = self.ctx.parent(node)
        program = False
        if type(parent) is cst.Subscript and parent.value is node and len(parent.slice) == 1:
            index = parent.slice[0].slice
            program = (type(index) is cst.Index and type(index.value) is cst.Integer
                       and index.value.value in (("0", "1") if entry == "sys.orig_argv" else ("0",)))
        self._argv.append((node, entry, program, self.ctx.function_key, module_targets(self.ctx, node)))

    def finish(self) -> None:
        super().finish()
        for node, entry, program, key, targets in self._argv:
            if key != "<module>":
                if not program or self.ctx.is_init_only(key):
                    continue  # a per-call branch on the command line is GK110's
            elif not targets or not reaches_forward(self.ctx, targets):
                continue  # configuration the call never reads
            name = f"{entry}[0]" if program and entry == "sys.argv" else entry
            message = self.message.format(name=name, verb="read", what=_PROGRAM if program else _ARGV)
            self.report(node, message, evidence={"name": entry}, confidence=None if program else Confidence.LIKELY)

    def check_cpp(self, source: CppSource) -> None:
        by_line: dict[str, tuple[int, str]] = {}
        for i, tok in cpp_idents(source, _CPP_NAMES):
            if tok.text == "isActive" and not _record_function_read(source, i):
                continue
            line = source.line_in_source(tok.offset)
            kept = by_line.get(line)
            # `c_profilefunc != nullptr || c_tracefunc`: one finding per line, the certain one first
            if kept is None or (CPP_WHAT[kept[1]] in _LIKELY and CPP_WHAT[tok.text] not in _LIKELY):
                by_line[line] = (tok.offset, tok.text)
        for i, tok in cpp_idents(source, _SIGNAL_QUERIES):
            named = _numbered_profiling_signal(source, i)
            if named and source.line_in_source(tok.offset) not in by_line:
                by_line[source.line_in_source(tok.offset)] = (tok.offset, named)
        for offset, name in sorted(by_line.values()):
            what = CPP_WHAT[name]
            self.report_cpp(source, offset, self.message.format(name=name, verb="read", what=what),
                            evidence={"name": name},
                            confidence=Confidence.LIKELY if what in _LIKELY else None)
