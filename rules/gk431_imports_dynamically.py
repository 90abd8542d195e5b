from __future__ import annotations

from typing import Optional

import libcst as cst

from gatekeeper.report import Category, Severity
from gatekeeper.analyses.cpp_source import cpp_call_strings, cpp_calls, cpp_idents
from gatekeeper.analyses.harness_support import UseRule
from gatekeeper.static.beside_files import beside_file
from gatekeeper.static.cpp_sources import CppSource
from gatekeeper.static.rule import Rule
from gatekeeper.static.names import string_value
from gatekeeper.static.syntax import argument
from gatekeeper.static.examples import Invalid, Valid, snippet

_AVAILABILITY = ("importlib.util.find_spec", "importlib.metadata", "importlib.resources")


class ImportsDynamically(UseRule):
    """Imports through the import machinery instead of an `import` statement:
    `__import__(...)`, `importlib.import_module`, `importlib.reload`,
    `importlib.util.spec_from_file_location` / `module_from_spec`, `importlib.machinery`,
    the old `imp` module, `pkgutil` loaders.

    Why it games the benchmark: the imported name is a string the static rules cannot
    follow (it can be assembled or decoded), so it hides imports of the reference, of
    `subprocess` or of harness modules, and loading a module from a file path runs code
    that is not part of the submission.

    In C++/CUDA sources: `py::module_::import(...)` and `PyImport_ImportModule(...)` (a
    warning for torch, numpy and triton, which extensions sometimes need).

    A module loaded by a path fixed in the source beside the submission's own file
    (`spec_from_file_location("k", os.path.join(os.path.dirname(__file__), "kernels.py"))`, a
    harness that imports `solution.py` by path leaves no relative import) is a warning only:
    the path is no run-time name, and that file is checked with the submission.

    A name written in the source (a literal, or the variable of a `for` over a literal tuple of
    them, as a version-compatibility lookup does) of torch, triton or numpy is a warning: nothing
    is hidden, and the name is bound as that import for every other rule
    (`m = importlib.import_module("torch")` makes `m.matmul` torch's).

    Not flagged: plain `import` statements (also inside `try/except ImportError`).
    `importlib.util.find_spec`, `importlib.metadata` and `importlib.resources` only ask
    whether a package exists or read its metadata: a warning.
    """

    code = "GK431"
    name = "ImportsDynamically"
    category = Category.DYNAMIC_CODE
    severity = Severity.ERROR
    summary = "imports modules through __import__ or importlib"
    message = "`{name}` imports a module by a run-time name, which hides what is imported from every check."
    hint = (
        "Use plain `import x` / `from x import y` statements at the top of the file. If an "
        "optional package may be missing, wrap a plain import in `try/except ImportError`."
    )
    NAMES = ("builtins.__import__", "importlib", "imp", "pkgutil.get_loader", "pkgutil.find_loader",
             "pkgutil.iter_modules", "pkgutil.walk_packages", "zipimport")
    VALID = [
        Valid(snippet("""
            try:
                import triton
            except ImportError:
                triton = None
        """)),
        Valid(snippet("""
            import torch
            from torch.utils.cpp_extension import load_inline
        """)),
    ]
    INVALID = [
        Invalid("mod = __import__('subprocess')\n", line=1, message="`__import__` imports a module by a run-time name"),
        Invalid(snippet("""
            import importlib
            ref = importlib.import_module('reference')
        """), line=2, message="`importlib.import_module` imports a module by a run-time name"),
        Invalid(snippet("""
            from importlib import util
            spec = util.spec_from_file_location('r', '/tmp/r.py')
        """), line=2, message="`importlib.util.spec_from_file_location` imports a module by a run-time name"),
        Invalid(snippet("""
            import importlib as il
            name = 'o' + 's'
            os_mod = il.import_module(name)
        """), line=3, message="`importlib.import_module` imports a module by a run-time name"),
        Invalid(snippet("""
            import importlib
            for name in ("triton.language.extra.libdevice", "triton.language.extra.cuda.libdevice"):
                try:
                    libdevice = importlib.import_module(name)
                    break
                except ImportError:
                    continue
        """), line=4, message="by a name written in the source"),
        Invalid(snippet("""
            from importlib import reload
            import torch
            reload(torch)
        """), line=3, message="`importlib.reload` imports a module by a run-time name"),
        Invalid(snippet("""
            src = r'''
            #include <torch/extension.h>
            void f() { auto sp = py::module_::import("subprocess"); }
            '''
        """), line=3, message="The C++/CUDA source imports the Python module `subprocess` at run time"),
    ]

    def _own_sidecar(self, qual: str, node: cst.CSTNode) -> Optional[str]:
        """The sidecar a by-path load names, for the call `node` heads (`module_from_spec(spec)`
        through the module constant `spec` bound to such a load), else None."""
        if not qual.startswith(_BY_PATH):
            return None
        call = self.ctx.parent(node)
        while type(call) is cst.Attribute:
            call = self.ctx.parent(call)
        if type(call) is not cst.Call:
            return None
        if qual.endswith("module_from_spec"):
            spec = call.args[0].value if call.args else None
            values = self.ctx.constants.get(spec.value, []) if type(spec) is cst.Name else []
            return _sidecar_name(self, values[0]) if len(values) == 1 and type(values[0]) is cst.Call else None
        return _sidecar_name(self, call)

    def check_cpp(self, source: CppSource) -> None:
        """`py::module_::import("subprocess")`, `PyImport_ImportModule("os")` in C++ sources."""
        tokens = source.tokens
        hits = [(i, tok) for i, tok in cpp_calls(source, frozenset({"PyImport_ImportModule", "PyImport_Import"}))]
        hits += [(i, tok) for i, tok in cpp_idents(source, frozenset({"import"}))
                 if i >= 2 and tokens[i - 1].text == "::" and tokens[i - 2].text in ("module_", "module")
                 and i + 1 < len(tokens) and tokens[i + 1].text == "("]
        for i, tok in hits:
            strings, _ = cpp_call_strings(source, i)
            name = strings[0] if strings else None
            benign = name is not None and name.split(".")[0] in ("torch", "numpy", "triton")
            self.report_cpp(source, tok.offset, f"The C++/CUDA source imports the Python module `{name or '<computed>'}` "
                            "at run time, where the Python checks do not look.", evidence={"module": name},
                            severity=Severity.WARNING if benign and self.active_severity == Severity.ERROR else None)

    def describe(self, qual: str, entry: str, node: cst.CSTNode) -> Optional[tuple[str, Optional[Severity]]]:
        sidecar = self._own_sidecar(qual, node)
        if sidecar is not None:
            return (f"`{qual}` loads the submission's own `{sidecar}` by its path beside this file; it is checked "
                    "as part of the submission, but a plain `import` says the same to every reader.", Severity.WARNING)
        if any(qual == a or qual.startswith(a + ".") for a in _AVAILABILITY):
            return (f"`{qual}` is used; it only checks whether a package exists, but a plain "
                    "`import` in `try/except ImportError` says the same without importlib.", Severity.WARNING)
        names = _literal_names(self, qual, node)
        if names and all(name.split(".")[0] in _LIBRARIES for name in names):
            return (f"`{qual}` imports {', '.join(f'`{n}`' for n in names)} by a name written in the source: no "
                    "name is hidden, but a plain `import` in `try/except ImportError` says the same to every "
                    "reader and every check.", Severity.WARNING)
        return self.message.format(name=qual.replace("builtins.", "")), None


_LIBRARIES = ("torch", "triton", "numpy")  # what a kernel file imports by name for version compatibility


def _literal_names(rule: Rule, qual: str, node: cst.CSTNode) -> list[str]:
    """The module names an `importlib.import_module(...)` / `__import__(...)` call imports when
    they are written in the source: a literal, or the variable of an enclosing `for` over a
    literal tuple or list of them (a version-compatibility lookup). Empty otherwise."""
    if qual not in ("importlib.import_module", "builtins.__import__"):
        return []
    call = rule.ctx.parent(node)
    if type(call) is not cst.Call or not call.args or call.args[0].keyword is not None:
        return []
    arg = call.args[0].value
    name = string_value(arg)
    if name is not None:
        return [name]
    if type(arg) is not cst.Name:
        return []
    scope = rule.ctx.parent(call)
    while scope is not None and type(scope) not in (cst.FunctionDef, cst.Module):
        if type(scope) is cst.For and type(scope.target) is cst.Name and scope.target.value == arg.value \
                and type(scope.iter) in (cst.Tuple, cst.List):
            values = [string_value(e.value) for e in scope.iter.elements]
            return [v for v in values if v is not None] if all(v is not None for v in values) else []
        scope = rule.ctx.parent(scope)
    return []


_BY_PATH = ("importlib.util.spec_from_file_location", "importlib.util.module_from_spec",
            "importlib.machinery.SourceFileLoader")


def _sidecar_name(rule: Rule, call: cst.Call) -> Optional[str]:
    """The `.py` file beside the submission that `spec_from_file_location(name, PATH)` or
    `SourceFileLoader(name, PATH)` loads, when PATH is fixed in the source and the file exists."""
    arg = argument(call, 1, "location") or argument(call, 1, "path")
    name = beside_file(arg, rule.ctx.constants) if arg is not None else None
    folder = rule.ctx.folder() if callable(rule.ctx.folder) else rule.ctx.folder
    if name is None or not name.endswith(".py") or folder is None:
        return None
    try:
        path = (folder / name).resolve()
        return name if folder.resolve() in path.parents and path.is_file() else None
    except OSError:
        return None
