from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Optional

import libcst as cst

from gatekeeper.static.walk import children as node_children, subtree

from gatekeeper.report import Category, Confidence, Severity
from gatekeeper.analyses.cpp_source import cpp_call_strings, cpp_calls, cpp_idents, cpp_statement_strings
from gatekeeper.analyses.harness_support import resolve
from gatekeeper.analyses.path_targets import classify, write_mode
from gatekeeper.analyses.reference_names import is_reference_path
from gatekeeper.static.cpp_sources import CppSource
from gatekeeper.static.examples import Invalid, Valid, snippet
from gatekeeper.static.names import string_value
from gatekeeper.static.rule import Rule
from gatekeeper.static.syntax import argument, in_main_guard

# The files a problem is made of (KernelBench-Hard's folder, KernelBench's sidecar) and the
# checker's own configuration: whoever writes them sets the shapes, tolerances and rules.
PROBLEM_FILES = frozenset({"problem.yaml", "problem.yml", "shapes.py", "check.py", "reference.py",
                           "gatekeeper.toml"})
# Files a harness reads its shapes and tolerances from; shipped beside the submission with
# contents other than the trusted problem's, they are the submission's own problem. (check.py
# and reference.py beside a submission may be the user's own scripts: only writes count.)
_SHIPPED = ("problem.yaml", "problem.yml", "shapes.py")
_OPENERS = ("builtins.open", "io.open", "codecs.open", "io.FileIO")
_OS_WRITES = {"os.rename": -1, "os.replace": -1, "os.renames": -1, "os.symlink": -1, "os.link": -1,
              "shutil.copy": -1, "shutil.copy2": -1, "shutil.copyfile": -1, "shutil.move": -1, "os.truncate": 0}
_PATH_WRITES = frozenset({"write_text", "write_bytes", "touch", "symlink_to", "hardlink_to"})
# The last name of every call this rule judges: a call named otherwise is not looked at.
_WRITE_NAMES = frozenset({"open", "FileIO", "rename", "replace", "renames", "symlink", "link", "copy", "copy2",
                          "copyfile", "move", "truncate"}) | _PATH_WRITES
_CPP_WRITERS = frozenset({"fopen", "freopen", "creat", "rename"})
# Module-level names a harness reads from a problem: shapes.py's SHAPES, problem.yaml's tolerance.
HARNESS_NAMES = frozenset({"SHAPES", "shapes", "TOLERANCE", "TOLERANCES", "tolerance", "tolerances",
                           "ATOL", "RTOL", "atol", "rtol"})
_DTYPE_KEY = re.compile(r"^(torch\.)?(float|bfloat|int|uint|fp|bf|half|double|float8)\w*$")


class BringsOwnProblem(Rule):
    """The submission brings its own problem: it writes one of the problem's files
    (`problem.yaml`, `shapes.py`, `check.py`, `reference.py`, the problem file itself or its
    `.toml` sidecar, `gatekeeper.toml`) through `open(..., "w")`, `Path.write_text`,
    `shutil.copy`/`move`, `os.replace`/`symlink`, or from C++ (`fopen(..., "w")`,
    `std::ofstream`); it ships a `problem.yaml` or `shapes.py` beside itself, in a folder
    other than the trusted problem's and with other contents; or it defines, at module level and for nobody in the file, the values a
    harness reads from a problem: `SHAPES = [{"M": 4096, ...}]` (shapes.py's form),
    `tolerance = {"float32": 0.1}` (problem.yaml's form), `ATOL = 0.5`.

    Why it games the benchmark: shapes and tolerances must come only from the trusted
    problem. A harness that picks up the submission's `problem.yaml` or `shapes.py` (the
    same folder, a later run, a relative import) checks the submission at the shapes and
    tolerances the submission chose: tiny sizes, a loose atol, no forbidden ops.

    Confidence: writes and shipped files are certain. An unused module-level tolerance or
    shape constant is certain when it has a problem file's structure (a list of size dicts,
    a dict keyed by dtype) and `likely` (a warning under default) when it is a bare number:
    it may be a leftover of a removed self-test.

    Not flagged: reading these files; writes inside `if __name__ == "__main__":`; files
    named like them in another folder of a build (`build/check.py.o` is not `check.py`);
    constants that the file itself uses (`ATOL` in a build-time self-test); `get_inputs` /
    `get_init_inputs` copied from the reference.
    """

    code = "GK417"
    name = "BringsOwnProblem"
    category = Category.HARNESS_TAMPERING
    severity = Severity.ERROR
    summary = "writes or ships its own problem files (problem.yaml, shapes.py, tolerances)"
    message = ("{what}: the shapes, tolerances and forbidden ops must come only from the trusted problem, and a "
               "harness that reads these would check the submission against the problem it chose.")
    hint = (
        "Do not write, ship or define problem files or values (problem.yaml, shapes.py, check.py, "
        "reference.py, tolerances, SHAPES). Let the harness bring the problem; read sizes from the inputs."
    )
    VALID = [
        Valid(snippet("""
            import os
            with open(os.path.join(os.path.dirname(__file__), 'shapes.py')) as f:
                text = f.read()
            with open('build_log.txt', 'w') as f:
                f.write('ok')
        """)),
        Valid(snippet("""
            import torch
            ATOL = 1e-4
            def _selftest(ext):
                t = torch.randn(8, 8)
                assert torch.allclose(ext.f(t), t.relu(), atol=ATOL)
            if __name__ == '__main__':
                open('problem.yaml', 'w').write('name: scratch')
        """)),
    ]
    INVALID = [
        Invalid(snippet("""
            from pathlib import Path
            HERE = Path(__file__).parent
            (HERE / 'problem.yaml').write_text('tolerance: {float32: 0.5}')
        """), line=3, message="`.write_text()` writes `problem.yaml`"),
        Invalid(snippet("""
            import shutil, os
            shutil.copy(os.path.join(os.path.dirname(__file__), 'mine.py'), 'shapes.py')
        """), line=2, message="`shutil.copy` writes `shapes.py`"),
        Invalid(snippet("""
            SHAPES = [{'M': 16, 'N': 16, 'K': 16}]
            class Model:
                pass
        """), line=1, message="module-level `SHAPES` has the form of a problem's"),
        Invalid(snippet("""
            tolerance = {'float32': 0.5, 'bfloat16': 1.0}
        """), line=1, message="module-level `tolerance` has the form of a problem's"),
        Invalid(snippet("""
            src = r'''
            #include <cstdio>
            void plant() { FILE* f = fopen("check.py", "w"); fputs("ok = True", f); fclose(f); }
            '''
        """), line=3, message="`fopen` writes `check.py`"),
    ]

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.constants: list[tuple[cst.Assign, str]] = []
        self.reads: dict[str, int] = {}  # harness names: how often they appear as a name
        # writes to a path built from a parameter of a helper: (helper, parameter index, call name)
        self.helper_writes: list[tuple[str, int, str]] = []
        self.calls: list[cst.Call] = []

    # writes -----------------------------------------------------------------------------
    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        last = func.value if type(func) is cst.Name else func.attr.value if type(func) is cst.Attribute else None
        if last not in _WRITE_NAMES:
            if type(func) is cst.Name:
                self.calls.append(node)  # a helper that writes a path it is given (see finish)
            return  # most calls: nothing that writes a file (aliases of these are rare and GK442's)
        qual = resolve(self.ctx, func)
        target: Optional[cst.BaseExpression] = None
        name = qual or ""
        if qual in _OPENERS:
            if write_mode(self.ctx, node, 1) is not False:
                target = argument(node, 0, "file")
        elif qual in _OS_WRITES:
            index = _OS_WRITES[qual]
            positional = [a.value for a in node.args if a.keyword is None and not a.star]
            target = argument(node, index) if index >= 0 else (positional[-1] if positional else None)
        elif qual is None and type(func) is cst.Attribute:
            method = func.attr.value
            if method in _PATH_WRITES or (method == "open" and write_mode(self.ctx, node, 0)):
                target, name = func.value, f".{method}()"
            elif method in ("rename", "replace") and node.args:
                target, name = node.args[0].value, f".{method}()"
        if type(func) is cst.Name:
            self.calls.append(node)  # a helper that writes a path it is given (see finish)
        if target is None:
            return
        info = classify(self.ctx, target)
        if info.text is None and self.ctx.functions:
            self._via_parameter(target, name)
        file = self._problem_file(info.text)
        if file is not None and not in_main_guard(self.ctx, node):
            what = f"`{name.replace('builtins.', '')}` writes `{file}`, a file of the problem"
            self.report(node, self.message.format(what=what), evidence={"writes": file, "call": name})

    def _via_parameter(self, target: cst.BaseExpression, name: str) -> None:
        """`def _plant(fname, text): open(os.path.join(here, fname), "w")`: which parameter
        names the file, so that the helper's call sites say which files it writes."""
        function = self.ctx.functions[-1]
        params = [p.name.value for p in (*function.params.posonly_params, *function.params.params)]
        used = {n.value for n in _names(target)}
        for local in list(used):  # `target = os.path.join(here, fname)`: one local followed
            binding = self.ctx.resolver.lookup(local)
            if binding is not None and binding.kind == "local" and binding.value is not None:
                used |= {n.value for n in _names(binding.value)}
        for index, param in enumerate(params):
            if param in used:
                self.helper_writes.append((function.name.value, index, name))

    def _problem_file(self, text: Optional[str]) -> Optional[str]:
        if not text:
            return None
        base = text.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]
        if base in PROBLEM_FILES:
            return base
        problem = self.ctx.problem
        if problem is not None:
            stem = Path(problem.path).stem
            if base in (f"{stem}.py", f"{stem}.toml"):
                return base
        if base.endswith(".py") and is_reference_path(self.ctx, base):
            return base
        return None

    def check_cpp(self, source: CppSource) -> None:
        for index, tok in cpp_calls(source, _CPP_WRITERS):
            strings, _ = cpp_call_strings(source, index)
            if tok.text in ("fopen", "freopen") and (len(strings) < 2 or not any(c in strings[1] for c in "wax+")):
                continue
            self._cpp(source, tok.offset, tok.text, strings[-1 if tok.text == "rename" else 0] if strings else None)
        for _, tok in cpp_idents(source, frozenset({"ofstream", "fstream"})):
            strings = cpp_statement_strings(source, tok.offset)
            self._cpp(source, tok.offset, f"std::{tok.text}", strings[0] if strings else None)

    def _cpp(self, source: CppSource, offset: int, name: str, path: Optional[str]) -> None:
        file = self._problem_file(path)
        if file is not None:
            what = f"`{name}` writes `{file}`, a file of the problem (in the C++/CUDA source)"
            self.report_cpp(source, offset, self.message.format(what=what), evidence={"writes": file, "call": name})

    # values a harness reads ---------------------------------------------------------------
    def visit_Assign(self, node: cst.Assign) -> None:
        if self.ctx.functions or self.ctx.classes:
            return
        for target in node.targets:
            if type(target.target) is cst.Name and target.target.value in HARNESS_NAMES:
                self.constants.append((node, target.target.value))

    def _count_reads(self) -> None:
        """How often each harness name appears as a name (not a keyword, not an attribute):
        one walk, only in the rare file that defines one at module level."""
        wanted = {name for _, name in self.constants}
        for node in subtree(self.ctx.module):
            if type(node) is cst.Name and node.value in wanted:
                parent = self.ctx.parent(node)
                if not ((type(parent) is cst.Arg and parent.keyword is node)
                        or (type(parent) is cst.Attribute and parent.attr is node)):
                    self.reads[node.value] = self.reads.get(node.value, 0) + 1

    def finish(self) -> None:
        self._helper_calls()
        if self.constants:
            self._count_reads()
        for node, name in self.constants:
            if self.reads.get(name, 0) > 1 or in_main_guard(self.ctx, node):
                continue  # the file reads it itself (a self-test), or only a __main__ block defines it
            structured = _problem_form(node.value)
            form = "has the form of a problem's" if structured else "is what a problem defines"
            what = (f"module-level `{name}` {form} ({'declared shapes' if name.lower() == 'shapes' else 'tolerances'}) "
                    "and nothing in the file reads it: it is there for a harness to pick up")
            self.report(node, self.message.format(what=what), evidence={"defines": name},
                        confidence=None if structured else Confidence.LIKELY)
        self._shipped()

    def _helper_calls(self) -> None:
        if not self.helper_writes:
            return
        for call in self.calls:
            for helper, index, name in self.helper_writes:
                if call.func.value != helper or in_main_guard(self.ctx, call):  # type: ignore[attr-defined]
                    continue
                arg = argument(call, index)
                file = self._problem_file(classify(self.ctx, arg).text) if arg is not None else None
                if file is not None:
                    what = (f"`{helper}(...)` writes `{file}`, a file of the problem (through "
                            f"`{name.replace('builtins.', '')}` in the helper)")
                    self.report(call, self.message.format(what=what), evidence={"writes": file, "call": helper})
                    break

    def _shipped(self) -> None:
        """Problem files lying beside the submission, in a folder that is not the problem's."""
        problem = self.ctx.problem
        if problem is None or not self.ctx.path or self.ctx.path.startswith("<"):
            return
        # abspath, not resolve: no file-system walk per path component (this runs for every file)
        # and strings, not Path objects, up to a name that is there (pathlib was ~0.8% of a batch)
        here = os.path.dirname(os.path.abspath(self.ctx.path))
        trusted = os.path.dirname(os.path.abspath(problem.path))
        if here == trusted:  # both normalised by abspath, as Path equality would compare them
            return
        shipped = sorted(n for n in _SHIPPED if os.path.isfile(os.path.join(here, n))
                         and not _same(Path(here, n), Path(trusted, n)))
        if shipped:
            what = f"the submission's folder ships its own {', '.join(f'`{n}`' for n in shipped)}"
            entry = problem.entry
            # reported at the submission's class (else its first statement): the file has no line for a folder
            where = next((s for s in self.ctx.module.body if type(s) is cst.ClassDef and s.name.value == entry),
                         self.ctx.module.body[0] if self.ctx.module.body else None)
            if where is not None:
                self.report(where, self.message.format(what=what), evidence={"ships": shipped, "folder": str(here)})


def _same(mine: Path, trusted: Path) -> bool:
    try:
        return trusted.is_file() and mine.read_bytes() == trusted.read_bytes()
    except OSError:
        return False


def _names(expr: cst.CSTNode) -> list[cst.Name]:
    out: list[cst.Name] = []
    stack: list[cst.CSTNode] = [expr]
    while stack:
        node = stack.pop()
        if type(node) is cst.Name:
            out.append(node)
        stack.extend(node_children(node))
    return out


def _problem_form(value: cst.BaseExpression) -> bool:
    """A list of dicts with string keys and integer values (shapes.py), or a dict keyed by
    dtype names (problem.yaml's tolerance)."""
    if type(value) in (cst.List, cst.Tuple):
        dicts = [e.value for e in value.elements]
        return bool(dicts) and all(type(d) is cst.Dict and d.elements and all(
            type(el) is cst.DictElement and string_value(el.key) for el in d.elements) for d in dicts)
    if type(value) is cst.Dict and value.elements:
        keys = [string_value(el.key) if type(el) is cst.DictElement else None for el in value.elements]
        return all(k is not None and _DTYPE_KEY.match(k) for k in keys)
    return False
