from __future__ import annotations

from typing import Optional

import libcst as cst

from gatekeeper.analyses.harness_names import PROCESS
from gatekeeper.report import Category, Severity
from gatekeeper.analyses.cpp_source import cpp_calls
from gatekeeper.analyses.harness_support import UseRule, literal
from gatekeeper.static.syntax import argument
from gatekeeper.static.cpp_sources import CppSource
from gatekeeper.static.examples import Invalid, Valid, snippet

# A toolchain query with a literal command line only reads (`nvcc --version` to pick an
# arch flag): a warning. A bare `nvidia-smi`, any other flag or a shell stays an error.
_QUERY_PROGRAMS = frozenset({"nvcc", "nvidia-smi", "gcc", "g++", "c++", "cc", "clang", "clang++", "ninja"})
_QUERY_FLAGS = ("--version", "-V", "-v", "--query-gpu=", "--format=", "-L", "--list-gpus", "-dumpversion",
                "-dumpfullversion", "--help")
_QUERY_RUNNERS = ("subprocess.run", "subprocess.check_output", "subprocess.check_call", "subprocess.call",
                  "subprocess.Popen", "subprocess.getoutput")

CPP_PROCESS = frozenset({
    "system", "popen", "_popen", "execv", "execve", "execvp", "execvpe", "execl", "execle",
    "execlp", "fexecve", "posix_spawn", "posix_spawnp", "fork", "vfork", "ptrace",
    "process_vm_readv", "process_vm_writev",
})


class RunsSubprocess(UseRule):
    """Starts another program: `subprocess.*`, `os.system`, `os.popen`, `os.exec*`,
    `os.spawn*`, `os.posix_spawn`, `pty`, `asyncio.create_subprocess_*`; in C++/CUDA
    sources `system(`, `popen(`, `exec*(`, `posix_spawn(`, `fork(`, and `ptrace(` /
    `process_vm_*` (reading or writing another process).

    Why it games the benchmark: a child process escapes every check made on the
    submission's own code: it can change GPU clocks, install packages, patch files the
    harness reads, or keep running after the call returns.

    Not flagged: the string "subprocess" in comments or text, and `load_inline`, which runs
    the compiler on the harness's behalf.

    Known false-positive pattern, a warning: a toolchain query with a literal command line
    and only query flags (`subprocess.check_output(["nvcc", "--version"])` to pick an arch
    flag, `nvidia-smi --query-gpu=name --format=csv`). It reads; it changes nothing.
    """

    code = "GK440"
    name = "RunsSubprocess"
    category = Category.SANDBOX_ESCAPE
    severity = Severity.ERROR
    summary = "starts a subprocess or another program"
    message = "`{name}` starts another program, outside every check on the submission."
    hint = (
        "Remove the subprocess. Compile kernels with `torch.utils.cpp_extension.load_inline` "
        "(the harness runs the compiler); a submission never runs commands."
    )
    NAMES = PROCESS
    VALID = [
        Valid(snippet("""
            # we call subprocess-free code only
            import os
            here = os.path.dirname(__file__)
        """)),
        Valid(snippet("""
            import torch
            from torch.utils.cpp_extension import load_inline
            ext = load_inline('k', cpp_sources='int f();', functions=['f'])
        """)),
        Valid(snippet("""
            src = '''
            #include <torch/extension.h>
            // system( is mentioned in a comment only
            int f() { return 0; }
            '''
        """)),
    ]
    INVALID = [
        Invalid(snippet("""
            src = '''
            #include <unistd.h>
            #include <sys/syscall.h>
            static long helper = syscall(SYS_clone, 17, 0, 0, 0, 0);
            '''
        """), line=4, message="`SYS_clone` starts another program"),
        Invalid(snippet("""
            import subprocess
            subprocess.run(['nvidia-smi'])
        """), line=2, message="`subprocess.run` starts another program"),
        Invalid(snippet("""
            import subprocess
            out = subprocess.check_output(["nvcc", "--version"])
        """), line=2, message="a toolchain query that only reads"),
        Invalid(snippet("""
            from subprocess import check_output as co
            co('ls', shell=True)
        """), line=2, message="`subprocess.check_output` starts another program"),
        Invalid(snippet("""
            import os
            def sh(c):
                return os.popen(c).read()
        """), line=3, message="`os.popen` starts another program"),
        Invalid(snippet("""
            import os as _o
            _o.execvp('python', ['python', '-c', 'pass'])
        """), line=2, message="`os.execvp` starts another program"),
        Invalid(snippet("""
            src = '''
            #include <cstdlib>
            int f() { return std::system("nvidia-smi -lgc 1980"); }
            '''
        """), line=3, message="`system()` starts another program"),
        Invalid(snippet("""
            cuda = '''
            #include <unistd.h>
            __global__ void k() {}
            void launch() { if (fork() == 0) { execl("/bin/sh", "sh", nullptr); } }
            '''
        """), line=4, message="`fork()` starts another program"),
    ]

    def describe(self, qual: str, entry: str, node: cst.CSTNode) -> Optional[tuple[str, Optional[Severity]]]:
        message = self.message.format(name=qual)
        call = self.ctx.parent(node)
        if qual in _QUERY_RUNNERS and type(call) is cst.Call and call.func is node and _is_query(self, call):
            severity = Severity.WARNING if self.active_severity == Severity.ERROR else None
            return message[:-1] + ": a toolchain query that only reads; prefer what torch reports " \
                "(`torch.version.cuda`, `torch.cuda.get_device_capability()`).", severity
        return message, None

    def check_cpp(self, source: CppSource) -> None:
        for _, tok in cpp_calls(source, CPP_PROCESS):
            self.report_cpp(source, tok.offset, self.message.format(name=f"{tok.text}()") + " (in the C++/CUDA source)",
                            evidence={"name": tok.text})
        for offset, what in _raw_process_syscalls(source):
            self.report_cpp(source, offset, self.message.format(name=what) + " (in the C++/CUDA source)",
                            evidence={"name": what})


# A process made by the raw system call, without the libc wrapper's name (red team round 6, h03: a
# helper process forked at import serves MKL while forward spins, outside every sample and census).
_RAW_NAMES = frozenset(f"{prefix}{name}" for prefix in ("SYS_", "__NR_")
                       for name in ("clone", "clone3", "fork", "vfork", "execve", "execveat"))
_RAW_NUMBERS = frozenset({56, 57, 58, 59, 322, 435})  # x86-64: clone, fork, vfork, execve, execveat, clone3


def _raw_process_syscalls(source: CppSource) -> list[tuple[int, str]]:
    """`syscall(SYS_clone, ...)`, `__NR_fork`, `syscall(56, ...)`, and libc's `clone(...)`."""
    tokens, idents = source.tokens, source.by_text["ident"]
    out = [(tokens[i].offset, name) for name in _RAW_NAMES & idents.keys() for i in idents[name]]
    for name in ("clone", "clone3", "__clone"):
        out += [(tokens[i].offset, f"{name}()") for i in idents.get(name, ())
                if i + 1 < len(tokens) and tokens[i + 1].text == "(" and (i == 0 or tokens[i - 1].text not in (".", "->"))]
    for i in idents.get("syscall", ()):
        if i + 2 < len(tokens) and tokens[i + 1].text == "(" and tokens[i + 2].kind == "number" \
                and tokens[i + 2].int_value in _RAW_NUMBERS:
            out.append((tokens[i].offset, f"syscall({tokens[i + 2].text}, ...)"))
    return sorted(out)


def _is_query(rule: RunsSubprocess, call: cst.Call) -> bool:
    """A literal argv (list or tuple of string literals) naming a toolchain program with
    only query flags, and no shell."""
    if any(a.keyword is not None and a.keyword.value == "shell" for a in call.args):
        return False
    argv = argument(call, 0, "args")
    if type(argv) not in (cst.List, cst.Tuple):
        return False
    words = [literal(rule.ctx, e.value) if type(e) is cst.Element else None for e in argv.elements]
    if len(words) < 2 or any(w is None for w in words):
        return False
    program = words[0].rsplit("/", 1)[-1]  # type: ignore[union-attr]
    return program in _QUERY_PROGRAMS and all(w.startswith(_QUERY_FLAGS) for w in words[1:])  # type: ignore[union-attr]
