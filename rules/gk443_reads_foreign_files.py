from __future__ import annotations

import re

from typing import Optional

import libcst as cst

from gatekeeper.report import Category, Severity
from gatekeeper.analyses.path_targets import write_mode
from gatekeeper.analyses.path_targets import FD, INSIDE, OUTSIDE, PathInfo, classify, literal_where
from gatekeeper.analyses.reference_names import is_reference_path
from gatekeeper.analyses.cpp_source import cpp_call_strings, cpp_calls, cpp_idents, cpp_statement_strings
from gatekeeper.analyses.harness_support import resolve
from gatekeeper.static.syntax import argument
from gatekeeper.static.cpp_sources import CppSource
from gatekeeper.static.rule import Rule
from gatekeeper.static.examples import Invalid, Valid, snippet

_OPENERS = ("builtins.open", "io.open", "codecs.open", "io.FileIO")
_LISTERS = {"os.listdir": 0, "os.scandir": 0, "os.walk": 0, "glob.glob": 0, "glob.iglob": 0}
_LOADERS = ("torch.load", "numpy.load", "numpy.fromfile", "numpy.loadtxt", "numpy.genfromtxt", "pickle.load",
            "joblib.load", "safetensors.torch.load_file", "safetensors.safe_open", "torch.jit.load")
_PATH_READS = frozenset({"read_text", "read_bytes", "iterdir", "glob", "rglob", "open"})
# Files that describe the machine, the same for a checker's process and a benchmark's: CPU
# features and cache sizes read to choose compile flags or tile sizes (not the harness, no answers).
_MACHINE_FILES = re.compile(r"/proc/cpuinfo|/sys/devices/system/cpu/[\w/.-]*|/sys/devices/system/node/[\w/.-]*")
_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"([^"\n]+)"', re.MULTILINE)


class ReadsForeignFiles(Rule):
    """Reads files other than the submission's own sources: `open(path)` / `Path.read_text`
    of an absolute, home or `..` path (`/proc/self/...`, `/etc/...`, the harness's files),
    of the reference (`reference.py`, the problem file), listings of directories outside
    (`os.listdir("/")`, `glob.glob("../*")`), and data loaders (`torch.load`,
    `numpy.load`, `pickle.load`) on any path; in C++/CUDA sources `fopen(..., "r")`,
    `std::ifstream` and `open()` of such paths, and `#include "/abs/path"` or
    `#include "../x.h"` (a read at build time).

    Why it games the benchmark: the answer can be read instead of computed (a saved
    reference output, the reference source, the harness's inputs), and `/proc` exposes the
    harness process.

    Not flagged: the machine's description (`/proc/cpuinfo`, `/sys/devices/system/cpu/...`),
    read to pick compile flags or tile sizes: it is the same for a checker and a benchmark.
    The submission's own sources next to it, found through `__file__`
    (`open(os.path.join(os.path.dirname(__file__), "kernel.cu")).read()`) or a relative
    path. A relative file that is not a source (`.json`, `.bin`) or a path that cannot be
    worked out is a warning.
    """

    code = "GK443"
    name = "ReadsForeignFiles"
    category = Category.SANDBOX_ESCAPE
    severity = Severity.ERROR
    summary = "reads files other than the submission's own sources"
    message = "`{name}` reads {what}: {why}"
    hint = (
        "Read only your own kernel sources, next to the submission: "
        "`open(os.path.join(os.path.dirname(__file__), 'kernel.cu')).read()`. Never load saved "
        "outputs, the reference, or files elsewhere on the machine."
    )
    VALID = [
        Valid(snippet("""
            import os
            src = open(os.path.join(os.path.dirname(__file__), 'kernel.cu')).read()
        """)),
        Valid(snippet("""
            from pathlib import Path
            src = (Path(__file__).parent / 'kernels' / 'mean.cuh').read_text()
        """)),
        Valid("me = open(__file__).read()\n"),
        Valid("avx2 = 'avx2' in open('/proc/cpuinfo').read()\n"),  # the machine, not the harness
        Valid(snippet("""
            src = '''
            #include <torch/extension.h>
            #include "common/tiles.cuh"
            int f() { return 0; }
            '''
        """)),
    ]
    INVALID = [
        Invalid("maps = open('/proc/self/maps').read()\n", line=1, message="`open` reads a path outside the working directory (/proc/self/maps)"),
        Invalid(snippet("""
            import torch
            expected = torch.load('expected_output.pt')
        """), line=2, message="`torch.load` reads serialised data"),
        Invalid(snippet("""
            import os
            ref = open(os.path.join(os.path.dirname(__file__), '..', 'reference.py')).read()
        """), line=2, message="`open` reads the reference (reference.py)"),
        Invalid(snippet("""
            import glob
            files = glob.glob('/workspace/**/*.pt', recursive=True)
        """), line=2, message="`glob.glob` reads a path outside the working directory (/workspace/**/*.pt)"),
        Invalid(snippet("""
            src = '''
            #include <fstream>
            void f() { std::ifstream in("/proc/self/environ"); }
            '''
        """), line=3, message="`std::ifstream` reads `/proc/self/environ`"),
        Invalid(snippet("""
            with open('reference.py') as f:
                code = f.read()
        """), line=1, message="`open` reads the reference (reference.py)"),
        Invalid(snippet("""
            src = '''
            #include <torch/extension.h>
            #include "../../expected_output.h"
            int f() { return 0; }
            '''
        """), line=3, message="`#include` reads `../../expected_output.h`"),
        Invalid(snippet("""
            from pathlib import Path
            with Path('/proc/self/mem').open('rb') as f:
                pass
        """), line=2, message="`.open()` reads a path outside the working directory (/proc/self/mem)"),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        func = resolve(self.ctx, node.func)
        if func is None:
            method = node.func.attr.value if (type(node.func) is cst.Attribute) else ""
            if method == "open" and write_mode(self.ctx, node, 0) is not False:
                return  # Path.open("w") is GK442's
            if method in _PATH_READS:
                info = classify(self.ctx, node.func.value)
                if method in ("read_text", "read_bytes") or info.where != "unknown":
                    self._judge(node, f".{method}()", info, listing=method not in ("read_text", "read_bytes"))
            return
        if func in _OPENERS:
            if write_mode(self.ctx, node, 1) is False:
                self._judge(node, func, classify(self.ctx, argument(node, 0, "file")), listing=False)
        elif func in _LISTERS:
            target = argument(node, 0)
            self._judge(node, func, classify(self.ctx, target) if target is not None else PathInfo(INSIDE), listing=True)
        elif func in _LOADERS:
            self._report(node, func, "serialised data", "saved tensors can hold precomputed outputs; "
                         "a submission computes its result.")

    def _judge(self, node: cst.CSTNode, name: str, info: PathInfo, *, listing: bool) -> None:
        if info.where == FD:
            return
        if is_reference_path(self.ctx, info.text):
            self._report(node, name, f"the reference ({info.text})", "the answer must be computed, not copied.")
        elif info.where == OUTSIDE:
            if info.text is not None and _MACHINE_FILES.fullmatch(info.text):
                return  # the machine's description: the same wherever the submission runs
            self._report(node, name, f"a path outside the working directory ({info.text or 'home or absolute'})",
                         "files there belong to the harness or the machine.")
        elif info.where == INSIDE:
            if listing or info.text is None or info.is_source:
                return
            self._report(node, name, f"the non-source file {info.text}", "only the submission's own sources "
                         "should be read.", Severity.WARNING)
        else:
            self._report(node, name, "a path the gatekeeper cannot resolve", "it may lie outside the working "
                         "directory.", Severity.WARNING)

    def _report(self, node: cst.CSTNode, name: str, what: str, why: str, severity: Optional[Severity] = None) -> None:
        if severity == Severity.WARNING and self.active_severity != Severity.ERROR:
            severity = self.active_severity
        self.report(node, self.message.format(name=name.replace("builtins.", ""), what=what, why=why),
                    evidence={"name": name}, severity=severity)

    def check_cpp(self, source: CppSource) -> None:
        for match in _INCLUDE.finditer(source.text):
            path = match.group(1)
            if literal_where(path) == OUTSIDE or is_reference_path(self.ctx, path):
                self.report_cpp(source, match.start(1), self.message.format(
                    name="#include", what=f"`{path}`", why="a build-time read of a file outside the submission's "
                    "own sources.") + " (in the C++/CUDA source)", evidence={"name": "#include", "path": path})
        for index, tok in cpp_calls(source, frozenset({"fopen", "open"})):
            strings, args = cpp_call_strings(source, index)
            if tok.text == "fopen" and len(strings) >= 2 and any(c in strings[1] for c in "wax+"):
                continue
            if tok.text == "open" and any(t.text in ("O_WRONLY", "O_RDWR", "O_CREAT") for t in args):
                continue
            self._cpp(source, tok.offset, tok.text, strings[0] if strings else None)
        for _, tok in cpp_idents(source, frozenset({"ifstream"})):
            strings = cpp_statement_strings(source, tok.offset)
            self._cpp(source, tok.offset, "std::ifstream", strings[0] if strings else None)

    def _cpp(self, source: CppSource, offset: int, name: str, path: Optional[str]) -> None:
        if path is not None and _MACHINE_FILES.fullmatch(path):
            return
        if path is not None and literal_where(path) == INSIDE and not is_reference_path(self.ctx, path):
            if PathInfo(INSIDE, path).is_source:
                return
        where = literal_where(path) if path is not None else "unknown"
        severity = None if where == OUTSIDE or is_reference_path(self.ctx, path) else Severity.WARNING
        what = f"`{path}`" if path else "a path the gatekeeper cannot resolve"
        self.report_cpp(source, offset, self.message.format(name=name, what=what, why="only the submission's "
                        "own sources may be read.") + " (in the C++/CUDA source)", evidence={"name": name},
                        severity=severity)

