from __future__ import annotations

from typing import Optional

import libcst as cst

from gatekeeper.report import Category, Severity
from gatekeeper.analyses.cpp_source import cpp_calls, cpp_idents
from gatekeeper.analyses.harness_support import UseRule
from gatekeeper.static.cpp_sources import CppSource
from gatekeeper.static.examples import Invalid, Valid, snippet

# The Python C API and pybind11 run Python source from C++, out of the Python checks' sight.
CPP_EVALUATORS = frozenset({"PyRun_SimpleString", "PyRun_SimpleStringFlags", "PyRun_String", "PyRun_StringFlags",
                            "Py_CompileString", "Py_CompileStringFlags", "PyEval_EvalCode", "PyRun_File"})


class EvaluatesCode(UseRule):
    """Runs code built at run time: the builtins `eval`, `exec` and `compile` (also as
    `builtins.exec`, `__builtins__["eval"]`, `getattr(builtins, "exec")`, or an alias
    `e = eval`), `runpy.run_path` / `runpy.run_module`, `code.InteractiveInterpreter`, and
    TorchScript compiled from a string (`torch.jit.CompilationUnit`);
    in C++/CUDA sources `py::exec` / `py::eval` and the C API's `PyRun_*` / `Py_CompileString`.

    Why it games the benchmark: the code that actually runs is not in the submission's
    source, so no static rule sees it; hacks are hidden this way (a patched timer inside an
    `exec` string, a reference import built from pieces).

    Not flagged: `torch.compile` (a compiler for the model, judged by the torch-fallback
    rules, not dynamic code), `re.compile`, `nn.Module.eval()` / `model.eval()`, and
    `ast.literal_eval` (it only parses literals). Strings and comments that mention eval
    are not code.
    """

    code = "GK430"
    name = "EvaluatesCode"
    category = Category.DYNAMIC_CODE
    severity = Severity.ERROR
    summary = "evaluates code built at run time (eval, exec, compile)"
    message = "`{name}` runs code that is not in the submission's source, where no check can see it."
    hint = (
        "Write the code out in the module: define functions and classes normally and call them. "
        "For a kernel, pass the C++/CUDA source as a string literal to `load_inline`."
    )
    NAMES = ("builtins.eval", "builtins.exec", "builtins.compile", "runpy", "code.interact",
             "code.InteractiveInterpreter", "code.InteractiveConsole", "code.compile_command",
             # TorchScript compiled from a string: its torch ops are read by no rule
             "torch.jit.CompilationUnit")
    VALID = [
        Valid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    return x
            m = ModelNew().eval()
            fast = torch.compile(m)
        """)),
        Valid(snippet(r"""
            import re, ast
            pat = re.compile(r'\d+')
            v = ast.literal_eval('[1, 2]')
        """)),
        Valid(snippet("""
            # we never call eval or exec here
            doc = 'eval(x) is forbidden'
        """)),
        Valid(snippet("""
            def compile(src):
                return src
            out = compile('k')
        """)),
    ]
    INVALID = [
        Invalid("exec('import torch; torch.allclose = lambda *a, **k: True')\n", line=1, message="`exec` runs code that is not in the submission's source"),
        Invalid(snippet("""
            import builtins
            builtins.exec(compile('x = 1', '<s>', 'exec'))
        """), line=2, message="`exec` runs code that is not in the submission's source"),
        Invalid(snippet("""
            run = eval
            def f(s):
                return run(s)
        """), line=1, message="`eval` runs code that is not in the submission's source"),
        Invalid(snippet("""
            code = ''.join(['im', 'port os'])
            __builtins__['exec'](code)
        """), line=2, message="`exec` runs code that is not in the submission's source"),
        Invalid(snippet("""
            import builtins
            f = getattr(builtins, 'ev' 'al')
        """), line=2, message="`eval` runs code that is not in the submission's source"),
        Invalid(snippet("""
            import torch
            _unit = torch.jit.CompilationUnit(TEMPLATE.format(verb="b" + "mm"))
        """), line=2, message="`torch.jit.CompilationUnit` runs code that is not in the submission's source"),
        Invalid(snippet("""
            import runpy
            runpy.run_path('helper.py')
        """), line=2, message="`runpy.run_path` runs code that is not in the submission's source"),
        Invalid(snippet("""
            src = r'''
            #include <torch/extension.h>
            void f() { py::exec("import torch; torch.allclose = lambda *a, **k: True"); }
            '''
        """), line=3, message="`py::exec()` runs code that is not in the submission's source"),
        Invalid(snippet("""
            src = r'''
            #include <Python.h>
            void f() { PyRun_SimpleString("import os"); }
            '''
        """), line=3, message="`PyRun_SimpleString()` runs code that is not in the submission's source"),
    ]

    def check_cpp(self, source: CppSource) -> None:
        tokens = source.tokens
        for _, tok in cpp_calls(source, CPP_EVALUATORS):
            self._cpp(source, tok.offset, tok.text)
        for i, tok in cpp_idents(source, frozenset({"exec", "eval", "eval_file"})):
            if i >= 2 and tokens[i - 1].text == "::" and tokens[i - 2].text in ("py", "pybind11"):
                self._cpp(source, tokens[i - 2].offset, f"{tokens[i - 2].text}::{tok.text}")

    def _cpp(self, source: CppSource, offset: int, name: str) -> None:
        self.report_cpp(source, offset, self.message.format(name=f"{name}()") + " (Python run from the C++/CUDA source)",
                        evidence={"name": name})

    def describe(self, qual: str, entry: str, node: cst.CSTNode) -> Optional[tuple[str, Optional[Severity]]]:
        return self.message.format(name=qual.replace("builtins.", "")), None
