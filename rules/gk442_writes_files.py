from __future__ import annotations

from typing import Optional

import libcst as cst

from gatekeeper.report import Category, Severity
from gatekeeper.analyses.path_targets import FD, INSIDE, OUTSIDE, TEMP, PathInfo, classify, literal_where, write_mode
from gatekeeper.analyses.cpp_source import cpp_call_strings, cpp_calls, cpp_idents, cpp_statement_strings
from gatekeeper.analyses.harness_support import resolve
from gatekeeper.static.syntax import argument
from gatekeeper.static.cpp_sources import CppSource
from gatekeeper.static.rule import Rule
from gatekeeper.static.examples import Invalid, Valid, snippet

_OPENERS = ("builtins.open", "io.open", "codecs.open", "os.fdopen", "io.FileIO")
# function -> index of the path argument that is written (-1: the last positional)
_OS_WRITES = {
    "os.remove": 0, "os.unlink": 0, "os.rmdir": 0, "os.removedirs": 0, "os.mkdir": 0, "os.makedirs": 0,
    "os.rename": -1, "os.replace": -1, "os.renames": -1, "os.chmod": 0, "os.chown": 0, "os.symlink": -1,
    "os.link": -1, "os.truncate": 0, "os.mkfifo": 0, "os.utime": 0, "os.lchmod": 0,
    "shutil.copy": -1, "shutil.copy2": -1, "shutil.copyfile": -1, "shutil.copytree": -1, "shutil.move": -1,
    "shutil.rmtree": 0, "shutil.copymode": -1, "shutil.copystat": -1, "shutil.make_archive": 0,
    "shutil.unpack_archive": -1, "shutil.chown": 0,
    "torch.save": 1, "numpy.save": 0, "numpy.savez": 0, "numpy.savetxt": 0, "numpy.ndarray.tofile": 0,
}
_FD_WRITES = ("os.write", "os.dup2", "os.dup", "os.writev", "os.pwrite", "os.sendfile")
_TEMPFILES = ("tempfile.NamedTemporaryFile", "tempfile.TemporaryFile", "tempfile.SpooledTemporaryFile",
              "tempfile.mkstemp", "tempfile.mkdtemp", "tempfile.TemporaryDirectory")
_PATH_METHODS = frozenset({"write_text", "write_bytes", "touch", "unlink", "rmdir", "symlink_to",
                           "hardlink_to", "mkdir", "rename", "replace", "chmod"})
_CPP_WRITERS = frozenset({"fopen", "freopen", "open", "creat", "unlink", "remove", "rename", "truncate", "mkdir"})
_CPP_WRITE_FLAGS = frozenset({"O_WRONLY", "O_RDWR", "O_CREAT", "O_TRUNC", "O_APPEND"})
# The system temporary directory, spelled as a literal path.
_TEMP_ROOTS = ("/tmp/", "/var/tmp/", "/dev/shm/")
_LOADERS = ("torch.utils.cpp_extension.load",)




class WritesFiles(Rule):
    """Writes, creates, moves or deletes files outside the submission's working directory:
    `open(path, "w"/"a"/"x"/"+")`, `Path.write_text/write_bytes/touch/unlink/mkdir`,
    `os.remove/rename/makedirs/...`, `shutil.*`, `torch.save`, `numpy.save`; writes to raw
    file descriptors (`os.write(1, ...)`, `os.dup2`, `open(1, "w")`); in C++/CUDA sources
    `fopen` with a write mode, `std::ofstream`, `open(..., O_WRONLY|O_CREAT)`, `unlink`,
    `rename`, `creat`.

    Why it games the benchmark: the files outside are the harness's (its logs, result
    files, caches, the reference, the installed torch); a raw fd write fakes the result
    channel.

    Relative paths and paths built from `os.path.dirname(__file__)` or `os.getcwd()` are
    inside and not flagged. `tempfile` and paths the rule cannot work out are a warning.

    Known false-positive pattern, a warning: a submission that writes its own C++/CUDA
    sources (or their folder) under `/tmp` and compiles them with
    `torch.utils.cpp_extension.load(sources=[...])` in the same file. The files are its
    own build inputs, not the harness's.
    """

    code = "GK442"
    name = "WritesFiles"
    category = Category.SANDBOX_ESCAPE
    severity = Severity.ERROR
    summary = "writes files outside the submission's directory or to raw file descriptors"
    message = "`{name}` writes {where}: {why}"
    hint = (
        "Do not write files. Keep results in tensors returned from `forward`; let `load_inline` "
        "manage its own build directory. If you must write, use a relative path in the working directory."
    )
    VALID = [
        Valid(snippet("""
            import os
            with open(os.path.join(os.path.dirname(__file__), 'kernel.cu')) as f:
                src = f.read()
        """)),
        Valid(snippet("""
            with open('build_log.txt', 'w') as f:
                f.write('ok')
        """)),
        Valid(snippet("""
            from pathlib import Path
            (Path(__file__).parent / 'gen.cu').write_text('// generated')
        """)),
    ]
    # A warning, not an error (tests/test_file_writes.py checks the severity).
    _WARNINGS = [
        Invalid(snippet("""
            import os
            from torch.utils.cpp_extension import load
            os.makedirs('/tmp/my_ext', exist_ok=True)
            with open('/tmp/my_ext/kernel.cu', 'w') as f:
                f.write(cuda_source)
            ext = load(name='my_ext', sources=['/tmp/my_ext/kernel.cu'])
        """), line=4, message="to the system temporary directory (/tmp/my_ext/kernel.cu)"),
    ]
    INVALID = [
        Invalid(snippet("""
            with open('/tmp/gk/result.json', 'w') as f:
                f.write('{"speedup": 100}')
        """), line=1, message="`open` writes outside the working directory (/tmp/gk/result.json)"),
        Invalid(snippet("""
            from pathlib import Path
            Path.home().joinpath('.cache', 'x').write_text('1')
        """), line=2, message="`.write_text()` writes outside the working directory (~/.cache/x)"),
        Invalid(snippet("""
            import shutil
            shutil.rmtree('/root/.cache/torch_extensions')
        """), line=2, message="`shutil.rmtree` writes outside the working directory (/root/.cache/torch_extensions)"),
        Invalid(snippet(r"""
            import os
            os.write(1, b'speedup: 50.0x\n')
        """), line=2, message="`os.write` writes to a raw file descriptor"),
        Invalid(snippet("""
            import os
            out = open(os.path.join('..', 'results.txt'), 'a')
        """), line=2, message="`open` writes outside the working directory (../results.txt)"),
        Invalid(snippet("""
            src = '''
            #include <cstdio>
            void log() { FILE* f = fopen("/tmp/out.txt", "w"); fclose(f); }
            '''
        """), line=3, message="`fopen` writes outside the working directory (/tmp/out.txt)"),
    ]
    INVALID += _WARNINGS

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # Writes of build sources under the temp dir, decided in finish: (node, name, info)
        self._build_inputs: list[tuple[cst.CSTNode, str, PathInfo]] = []
        self._loads_sources = False

    def visit_Call(self, node: cst.Call) -> None:
        func = resolve(self.ctx, node.func)
        if func in _LOADERS:
            self._loads_sources = True
        if func is None:
            if type(node.func) is cst.Attribute and node.func.attr.value == "open" and write_mode(self.ctx, node, 0):
                if self._pathlike(node.func.value):
                    self._path(node, ".open()", classify(self.ctx, node.func.value))
                return
            if type(node.func) is cst.Attribute and node.func.attr.value in _PATH_METHODS and (
                    node.func.attr.value.startswith("write") or self._pathlike(node.func.value)):
                self._path(node, f".{node.func.attr.value}()", classify(self.ctx, node.func.value))
            return
        if func in _OPENERS:
            writes = write_mode(self.ctx, node, 1)
            target = argument(node, 0, "file")
            info = classify(self.ctx, target)
            if func == "os.fdopen" or info.where == FD:
                if writes is not False:
                    self._report(node, func, "to a raw file descriptor", "it can fake the harness's result channel.")
                return
            if writes is None:
                self._report(node, func, "with a computed mode", "the mode may write.", Severity.WARNING)
            elif writes:
                self._path(node, func, info)
        elif func in _OS_WRITES:
            index = _OS_WRITES[func]
            target = argument(node, index) if index >= 0 else _last_positional(node)
            self._path(node, func, classify(self.ctx, target))
        elif func in _FD_WRITES:
            self._report(node, func, "to a raw file descriptor", "it can fake the harness's result channel.")
        elif func in _TEMPFILES:
            self._path(node, func, PathInfo(TEMP))

    def _pathlike(self, expr: cst.BaseExpression) -> bool:
        return classify(self.ctx, expr).where != "unknown"

    def _path(self, node: cst.CSTNode, name: str, info: PathInfo) -> None:
        if info.where == INSIDE:
            return
        if info.where == OUTSIDE and self._build_input(name, info):
            self._build_inputs.append((node, name, info))
        elif info.where == OUTSIDE:
            self._report(node, name, f"outside the working directory ({info.display or 'an absolute or home path'})",
                         "those files belong to the harness or the machine.")
        elif info.where == TEMP:
            self._report(node, name, "to the system temporary directory",
                         "files there outlive the call and are shared with the harness.", Severity.WARNING)
        else:
            self._report(node, name, "to a path the gatekeeper cannot resolve",
                         "it may lie outside the working directory.", Severity.WARNING)

    @staticmethod
    def _build_input(name: str, info: PathInfo) -> bool:
        """A C++/CUDA source, or a folder for them, under the system temp dir."""
        shown = info.display or ""
        if not shown.startswith(_TEMP_ROOTS):
            return False
        folder = name.endswith(("os.makedirs", "os.mkdir", ".mkdir()"))
        return folder or (info.is_source and not shown.endswith((".py", ".txt")))

    def finish(self) -> None:
        for node, name, info in self._build_inputs:
            if self._loads_sources:
                self._report(node, name, f"to the system temporary directory ({info.display})",
                             "these are the submission's own build inputs, but `load_inline` builds from strings "
                             "without any file.", Severity.WARNING)
            else:
                self._report(node, name, f"outside the working directory ({info.display})",
                             "those files belong to the harness or the machine.")

    def _report(self, node: cst.CSTNode, name: str, where: str, why: str, severity: Optional[Severity] = None) -> None:
        if severity == Severity.WARNING and self.active_severity != Severity.ERROR:
            severity = self.active_severity
        self.report(node, self.message.format(name=name.replace("builtins.", ""), where=where, why=why),
                    evidence={"name": name}, severity=severity)

    def check_cpp(self, source: CppSource) -> None:
        for index, tok in cpp_calls(source, _CPP_WRITERS):
            strings, args = cpp_call_strings(source, index)
            if tok.text in ("fopen", "freopen"):
                if len(strings) < 2 or not any(c in strings[1] for c in "wax+"):
                    continue
            elif tok.text == "open":
                if not any(t.text in _CPP_WRITE_FLAGS for t in args):
                    continue
            elif tok.text in ("remove", "rename") and not strings:
                continue  # std::remove(first, last, value) is an algorithm
            self._cpp_path(source, tok.offset, tok.text, strings[0] if strings else None)
        for _, tok in cpp_idents(source, frozenset({"ofstream", "fstream"})):
            strings = cpp_statement_strings(source, tok.offset)
            self._cpp_path(source, tok.offset, f"std::{tok.text}", strings[0] if strings else None)

    def _cpp_path(self, source: CppSource, offset: int, name: str, path: Optional[str]) -> None:
        where = literal_where(path) if path is not None else "unknown"
        if where == INSIDE:
            return
        if where == OUTSIDE:
            message = self.message.format(name=name, where=f"outside the working directory ({path})",
                                          why="those files belong to the harness or the machine.")
            self.report_cpp(source, offset, message + " (in the C++/CUDA source)", evidence={"name": name})
        else:
            message = self.message.format(name=name, where="to a path the gatekeeper cannot resolve",
                                          why="it may lie outside the working directory.")
            self.report_cpp(source, offset, message + " (in the C++/CUDA source)", evidence={"name": name},
                            severity=Severity.WARNING)


def _last_positional(call: cst.Call) -> Optional[cst.BaseExpression]:
    args = [a.value for a in call.args if a.keyword is None and not a.star]
    return args[-1] if args else None

