from __future__ import annotations

import re

import libcst as cst

from gatekeeper.report import Category, Severity
from gatekeeper.analyses.harness_names import PROCESS
from gatekeeper.analyses.cpp_source import cpp_call_strings, cpp_calls
from gatekeeper.analyses.harness_support import UseRule, matches, resolve, strings_in
from gatekeeper.static.cpp_sources import CppSource
from gatekeeper.static.examples import Invalid, Valid, snippet

INSTALL_COMMAND = re.compile(
    r"(?:\b(?:pip3?|conda|mamba|micromamba|apt-get|apt|yum|dnf|apk|uv|poetry|easy_install)\b.*\b(?:install|add)\b)"
    r"|(?:-m\s+(?:pip|ensurepip)\b)",
    re.IGNORECASE,
)
_CPP_SHELL = frozenset({"system", "popen", "_popen", "execl", "execlp", "execv", "execvp"})


def install_command(strings: list[str]) -> bool:
    return bool(INSTALL_COMMAND.search(" ".join(strings)))


class InstallsPackages(UseRule):
    """Installs packages at run time: `pip` (`pip.main`, `pip._internal`), `ensurepip`,
    `setuptools`' `easy_install`, or a `pip` / `conda` / `apt-get` / `uv` install command
    run through `subprocess`, `os.system` or `os.popen` (`[sys.executable, "-m", "pip",
    "install", ...]`); in C++/CUDA sources `system("pip install ...")`.

    Why it games the benchmark: the code that runs is downloaded after the checks, can
    replace torch or the harness's own dependencies, and needs the network the sandbox
    denies.

    Not flagged: importing an installed package, and the words "pip install" in comments
    or docstrings.
    """

    code = "GK446"
    name = "InstallsPackages"
    category = Category.SANDBOX_ESCAPE
    severity = Severity.ERROR
    summary = "installs packages at run time"
    message = "{name} installs packages at run time, changing the environment after it was checked."
    hint = (
        "Do not install anything. Use what the environment provides (torch, triton, the CUDA "
        "toolkit); state other requirements to the benchmark's maintainers instead."
    )
    NAMES = ("pip", "ensurepip", "setuptools.command.easy_install", "easy_install", "conda.cli")
    VALID = [
        Valid(snippet("""
            # requires: pip install triton (done by the environment)
            import triton
        """)),
        Valid("import subprocess\n"),
    ]
    INVALID = [
        Invalid(snippet("""
            import subprocess, sys
            subprocess.check_call([sys.executable, '-m', 'pip', 'install', 'flash-attn'])
        """), line=2, message="`subprocess.check_call` running `-m pip install flash-attn` installs packages at run time"),
        Invalid(snippet("""
            import os
            os.system('pip install --quiet cupy-cuda12x')
        """), line=2, message="`os.system` running `pip install --quiet cupy-cuda12x` installs packages at run time"),
        Invalid(snippet("""
            from pip._internal.cli.main import main as pipmain
            pipmain(['install', 'triton==3.0'])
        """), line=2, message="`pip._internal.cli.main.main` installs packages at run time"),
        Invalid(snippet("""
            src = '''
            #include <cstdlib>
            static int _ = std::system("pip3 install numba");
            '''
        """), line=3, message='`system("pip3 install numba")` installs packages at run time'),
    ]

    def describe(self, qual, entry, node):  # type: ignore[override]
        return self.message.format(name=f"`{qual}`"), None

    def visit_Call(self, node: cst.Call) -> None:
        super().visit_Call(node)
        func = resolve(self.ctx, node.func)
        if func and matches(func, PROCESS):
            strings = [s for arg in node.args for s in strings_in(self.ctx, arg.value)]
            if install_command(strings):
                self._used = True
                self.report(node, self.message.format(name=f"`{func}` running `{' '.join(strings)[:80]}`"),
                            evidence={"command": " ".join(strings)})

    def check_cpp(self, source: CppSource) -> None:
        for index, tok in cpp_calls(source, _CPP_SHELL):
            strings, _ = cpp_call_strings(source, index)
            if install_command(strings):
                self.report_cpp(source, tok.offset, self.message.format(name=f"`{tok.text}(\"{' '.join(strings)[:60]}\")`")
                                + " (in the C++/CUDA source)", evidence={"command": " ".join(strings)})
