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


# Standard-library entry points that run a statement given as a string, or a callable: a
# string is code (`timeit.Timer("out.copy_(a @ b)")`), a callable is not (`timeit.Timer(f)`).
STATEMENT_RUNNERS = ("timeit.Timer", "timeit.timeit", "timeit.repeat", "cProfile.run", "cProfile.runctx",
                     "profile.run", "profile.runctx", "pdb.run", "pdb.runeval", "pdb.runctx")
_STRING_NODES = (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)


def _is_string(ctx, expr: Optional[cst.BaseExpression], depth: int = 0) -> bool:  # type: ignore[no-untyped-def]
    """A string-valued expression: a literal, `+`/`%` of one, `.format(...)`/`.join(...)`, `str(...)`,
    or a name bound to one of these."""
    if expr is None or depth > 4:
        return False
    if isinstance(expr, _STRING_NODES):
        return True
    if type(expr) is cst.BinaryOperation and type(expr.operator) in (cst.Add, cst.Modulo):
        return _is_string(ctx, expr.left, depth + 1) or _is_string(ctx, expr.right, depth + 1)
    if type(expr) is cst.Call:
        func = expr.func
        if type(func) is cst.Attribute and func.attr.value in ("format", "join", "replace", "strip", "lower", "upper"):
            return True
        return ctx.qualname(func) in ("builtins.str", "builtins.chr")
    if type(expr) is cst.Name:
        binding = ctx.resolver.lookup(expr.value)
        return binding is not None and binding.kind in ("local", "alias") and _is_string(ctx, binding.value, depth + 1)
    return False


def _is_callable(ctx, expr: cst.BaseExpression) -> bool:  # type: ignore[no-untyped-def]
    """A lambda, a function or class of the file, or a method of `self`."""
    if type(expr) is cst.Lambda:
        return True
    if type(expr) is cst.Attribute and type(expr.value) is cst.Name and expr.value.value == "self":
        return True
    if type(expr) is cst.Name:
        binding = ctx.resolver.lookup(expr.value)
        return binding is not None and (binding.kind in ("def", "class") or type(binding.value) is cst.Lambda)
    return False


class EvaluatesCode(UseRule):
    """Runs code built at run time: the builtins `eval`, `exec` and `compile` (also as
    `builtins.exec`, `__builtins__["eval"]`, `getattr(builtins, "exec")`, or an alias
    `e = eval`), `runpy.run_path` / `runpy.run_module`, `code.InteractiveInterpreter`,
    TorchScript compiled from a string (`torch.jit.CompilationUnit`, a warning: its ops reach
    the dispatcher, where the run-time attribution sees them), and a statement string
    run by `timeit`, `cProfile.run`, `profile.run` or `pdb.run` (a callable given to them is
    read like any code; a value whose kind the source does not show is a warning);
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
             "torch.jit.CompilationUnit") + STATEMENT_RUNNERS
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
        # timeit on a callable: what runs is the submission's own code
        Valid(snippet("""
            import timeit
            def tune(plan, args):
                return timeit.Timer(lambda: plan(*args)).timeit(number=1), timeit.timeit(tune, number=1)
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
        """), line=2, message="`torch.jit.CompilationUnit` compiles TorchScript from a string, which no static rule reads"),
        # a statement string built at run time, timed once "to tune" (round 7, 2026-12-06)
        Invalid(snippet("""
            import timeit
            def tune(env):
                plan = "out.copy_(a " + chr(64) + " b)"
                return timeit.Timer(plan, globals=env).timeit(number=1)
        """), line=4, message="`timeit.Timer` runs code that is not in the submission's source"),
        Invalid(snippet("""
            import timeit
            def trial(plan: str, env: dict) -> float:
                return timeit.Timer(plan, globals=env).timeit(number=1)
        """), line=3, message="does not show whether that is a string"),
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
        if entry == "torch.jit.CompilationUnit":
            # TorchScript's ops go through the dispatcher, where the run-time work attribution
            # (GK667) sees them; honest code compiles small shape helpers this way
            return (f"`{qual}` compiles TorchScript from a string, which no static rule reads: its torch ops "
                    "are judged only at run time, by the work attribution (GK667)."), Severity.WARNING
        if entry in STATEMENT_RUNNERS:
            call = self.ctx.parent(node)
            if type(call) is not cst.Call or call.func is not node:
                return None  # imported or named, not run here
            given = [a.value for a in call.args if a.keyword is None][:2] + \
                [a.value for a in call.args if a.keyword is not None and a.keyword.value in ("stmt", "setup", "cmd",
                                                                                              "statement", "expression")]
            if not any(_is_string(self.ctx, value) for value in given):
                if all(_is_callable(self.ctx, value) for value in given):
                    return None  # a callable (`timeit.Timer(lambda: f(x))`): its body is read like any code
                # a parameter or other value whose kind the source does not show: maybe a string
                return (f"`{qual}` runs the statement it is given, and the source does not show whether that is "
                        "a string (code no check can see) or a callable."), Severity.WARNING
        return self.message.format(name=qual.replace("builtins.", "")), None
