from __future__ import annotations

import re
from typing import Optional

import libcst as cst

from gatekeeper.report import Category, Severity
from gatekeeper.analyses.cpp_source import cpp_idents
from gatekeeper.analyses.harness_support import UseRule, use_verb
from gatekeeper.static.cpp_sources import CppSource
from gatekeeper.static.examples import Invalid, Valid, snippet

# C++ guards and setters that change which dispatch keys the calls below them pass through.
# Honest code uses some of them for other keys (below-autograd guards); only a source that
# also names the Python keys is hiding its ops from a Python recorder.
_CPP_KEY_GUARDS = frozenset({
    "ExcludeDispatchKeyGuard", "ExcludeDispatchKeySetGuard", "IncludeDispatchKeyGuard", "IncludeDispatchKeySetGuard",
    "ForceDispatchKeyGuard", "tls_set_dispatch_key_excluded", "tls_set_dispatch_key_included",
    "_force_tls_local_dispatch_key_set",
})
# Keys (and c10's keyset of them) through which torch hands ops to Python modes and subclasses.
_PYTHON_KEYS = frozenset({"Python", "PythonTLSSnapshot", "PythonDispatcher", "python_ks"})
# Guards that switch the Python modes off whatever they are given.
_CPP_MODE_OFF = frozenset({"StashTorchDispatchModeGuard", "StashTorchDispatchStackGuard", "DisablePythonDispatcher",
                           "DisableTorchDispatch"})
_CPP_NAMES = _CPP_KEY_GUARDS | _CPP_MODE_OFF
# The same from Python. The key guards count only when the file names a Python key.
_PY_KEY_GUARDS = ("torch._C._ExcludeDispatchKeyGuard", "torch._C._IncludeDispatchKeyGuard",
                  "torch._C._ForceDispatchKeyGuard", "torch._C._dispatch_tls_set_dispatch_key_excluded",
                  "torch._C._dispatch_tls_set_dispatch_key_included")
_PY_MODE_OFF = ("torch._C._DisableTorchDispatch", "torch._C.DisableTorchFunction", "torch._C._unset_dispatch_mode",
                "torch._C._pop_torch_dispatch_stack", "torch._C._pop_torch_function_stack")
_PY_PYTHON_KEY = re.compile(r"DispatchKey\s*\.\s*(?:Python|PythonTLSSnapshot|PythonDispatcher)\b")


def _names_python_key(source: CppSource) -> Optional[int]:
    """Offset of the first Python dispatch key the source names (`DispatchKey::Python`, `c10::python_ks`)."""
    tokens = source.tokens
    for i, tok in cpp_idents(source, _PYTHON_KEYS):
        if tok.text == "python_ks" or (i >= 2 and tokens[i - 1].text == "::" and tokens[i - 2].text == "DispatchKey"):
            return tok.offset
    return None


class HidesOpsFromRecorder(UseRule):
    """The submission switches off the dispatch keys through which torch hands ops to Python:
    a C++ `c10::impl::ExcludeDispatchKeyGuard` / `ExcludeDispatchKeySetGuard` /
    `IncludeDispatchKeyGuard` / `ForceDispatchKeyGuard` or `c10::impl::
    tls_set_dispatch_key_excluded` in a source that names `DispatchKey::Python`,
    `PythonTLSSnapshot`, `PythonDispatcher` or `c10::python_ks` (in the guard or in a keyset
    built elsewhere in the source); the guards that stash or disable the Python modes
    (`StashTorchDispatchModeGuard`, `DisablePythonDispatcher`); or the same from Python
    (`torch._C._ExcludeDispatchKeyGuard` with a Python key, `torch._C._DisableTorchDispatch`,
    `torch._C.DisableTorchFunction`, `torch._C._unset_dispatch_mode`, popping the mode stacks).

    Why it games the benchmark: a checker records the ops a call runs through a Python
    dispatch mode, which sees them through these keys. With the keys excluded, torch's own
    kernels (`acc += x.select(0, r)`, an op found through the dispatcher) run unseen, and the
    checker attributes their work to the submission's kernel. A kernel has no use for the
    Python keys: its ops are its own.

    Not flagged: the same guards over other keys (`at::AutoDispatchBelowAutograd`,
    `c10::impl::ExcludeDispatchKeyGuard g(c10::DispatchKey::AutogradCPU)`), and these
    names in comments and strings.
    """

    code = "GK419"
    name = "HidesOpsFromRecorder"
    category = Category.HARNESS_TAMPERING
    severity = Severity.ERROR
    summary = "switches off torch's Python dispatch keys, hiding its ops from the checker's recorder"
    message = ("`{name}` is {verb}{keys}: it hides the torch ops below it from the Python dispatch mode a checker "
               "records work with, so torch's kernels can do the work unseen.")
    hint = (
        "Remove the guard. Compute the output with your own kernel and leave torch's dispatch keys as the caller "
        "set them; allocation (`torch::empty`) needs no guard."
    )
    NAMES = _PY_KEY_GUARDS + _PY_MODE_OFF
    VALID = [
        Valid(snippet("""
            src = r'''
            #include <torch/extension.h>
            torch::Tensor f(torch::Tensor x) {
              at::AutoDispatchBelowAutograd below;
              c10::impl::ExcludeDispatchKeyGuard g(c10::DispatchKey::AutogradCPU);  // DispatchKey::Python stays on
              return my_kernel(x);
            }
            '''
        """)),
        Valid(snippet("""
            import torch
            with torch.no_grad():
                y = torch.empty(4)
            keys = "torch._C._DisableTorchDispatch"
        """)),
    ]
    INVALID = [
        Invalid(snippet("""
            src = r'''
            #include <c10/core/impl/LocalDispatchKeySet.h>
            torch::Tensor f(torch::Tensor x) {
              c10::impl::ExcludeDispatchKeyGuard g(c10::DispatchKeySet({c10::DispatchKey::Python, c10::DispatchKey::PythonTLSSnapshot}));
              return x.sum(0);
            }
            '''
        """), line=4, message="`ExcludeDispatchKeyGuard` is used with the Python dispatch keys"),
        Invalid(snippet("""
            src = r'''
            static const auto kHidden = c10::DispatchKeySet(c10::DispatchKey::Python);
            torch::Tensor f(torch::Tensor x) {
              c10::impl::ExcludeDispatchKeySetGuard g(kHidden);
              return run(x);
            }
            '''
        """), line=4, message="`ExcludeDispatchKeySetGuard` is used with the Python dispatch keys"),
        Invalid(snippet("""
            import torch
            def forward(x):
                with torch._C._DisableTorchDispatch():
                    return torch.mm(x, x)
        """), line=3, message="`torch._C._DisableTorchDispatch` is called"),
        Invalid(snippet("""
            import torch
            _C = torch._C
            def forward(x):
                with _C._ExcludeDispatchKeyGuard(_C.DispatchKeySet(_C.DispatchKey.Python)):
                    return x @ x
        """), line=4, message="`torch._C._ExcludeDispatchKeyGuard` is called"),
    ]

    def describe(self, qual: str, entry: str, node: cst.CSTNode) -> Optional[tuple[str, Optional[Severity]]]:
        if entry in _PY_KEY_GUARDS and not _PY_PYTHON_KEY.search(self.ctx.text):
            return None  # a guard over other keys
        return self.message.format(name=qual, verb=use_verb(self.ctx, node), keys=""), None

    def check_cpp(self, source: CppSource) -> None:
        if not (source.by_text["ident"].keys() & _CPP_NAMES):
            return
        python_key = _names_python_key(source)
        seen: set[str] = set()
        for _, tok in cpp_idents(source, _CPP_NAMES):
            guard = tok.text in _CPP_KEY_GUARDS
            if guard and python_key is None:
                continue
            line = source.line_in_source(tok.offset)
            if line in seen:
                continue
            seen.add(line)
            keys = " with the Python dispatch keys" if guard else ""
            self.report_cpp(source, tok.offset, self.message.format(name=tok.text, verb="used", keys=keys),
                            evidence={"name": tok.text})
