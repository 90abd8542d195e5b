from __future__ import annotations

import re
from typing import Any

import libcst as cst

from gatekeeper.report import Category, Severity
from gatekeeper.analyses.harness_names import PROCESS
from gatekeeper.analyses.cpp_source import cpp_call_strings, cpp_calls, cpp_ident_names, cpp_idents
from gatekeeper.analyses.harness_support import matches, resolve, strings_in
from gatekeeper.static.cpp_sources import CppSource
from gatekeeper.static.rule import Rule
from gatekeeper.static.examples import Invalid, Valid, snippet

NVML_SETTER = re.compile(r"^nvml(?:Device|Unit)?(?:Set|Reset|Clear)\w*$")
SMI_SETTINGS = frozenset({
    "-lgc", "--lock-gpu-clocks", "-rgc", "--reset-gpu-clocks", "-lmc", "--lock-memory-clocks",
    "-rmc", "--reset-memory-clocks", "-ac", "--applications-clocks", "-rac", "--reset-applications-clocks",
    "-pl", "--power-limit", "-pm", "--persistence-mode", "-c", "--compute-mode", "-am",
    "--auto-boost-default", "--auto-boost-permission", "-r", "--gpu-reset", "-e", "--ecc-config",
    "-mig", "--multi-instance-gpu", "-cc", "--cuda-clocks", "-acp",
})
_CPP_SHELL = frozenset({"system", "popen", "_popen", "execl", "execlp", "execv", "execvp"})


def smi_setting(strings: list[str]) -> bool:
    text = " ".join(strings)
    if "nvidia-smi" not in text:
        return False
    words = {w.split("=")[0] for w in re.split(r"[\s,]+", text)}
    return bool(words & SMI_SETTINGS) or " clocks " in f" {text} "


class ChangesGpuClocks(Rule):
    """Changes GPU clocks, power or modes: NVML setters (`nvmlDeviceSetApplicationsClocks`,
    `nvmlDeviceSetGpuLockedClocks`, `nvmlDeviceSetPowerManagementLimit`, any
    `nvmlDeviceSet*` / `nvmlDeviceReset*`, through `pynvml` or not), or `nvidia-smi` with a
    setting flag (`-lgc`, `-ac`, `-pl`, `-pm`, `-c`, `-r`, ...) run through `subprocess` /
    `os.system`; the same in C++/CUDA sources.

    Why it games the benchmark: locking the submission's clocks high (or the reference's
    low) changes the measured speedup without changing the kernel, and it persists for
    every later run on the machine.

    Not flagged: reading GPU state (`nvmlDeviceGetClockInfo`, `nvidia-smi --query-gpu`,
    `torch.cuda.get_device_properties`); a bare `nvidia-smi` is GK440's (subprocess).
    """

    code = "GK447"
    name = "ChangesGpuClocks"
    category = Category.SANDBOX_ESCAPE
    severity = Severity.ERROR
    summary = "changes GPU clocks, power limits or modes"
    message = "{name} changes the GPU's clocks or settings, which skews every measurement on the machine."
    hint = "Remove it. Clocks and power are the harness's to fix; a kernel gets faster only by doing less or better work."
    VALID = [
        Valid(snippet("""
            import pynvml
            pynvml.nvmlInit()
            h = pynvml.nvmlDeviceGetHandleByIndex(0)
            mhz = pynvml.nvmlDeviceGetClockInfo(h, 0)
        """)),
        Valid(snippet("""
            import subprocess
            q = subprocess.run(['nvidia-smi', '--query-gpu=clocks.sm', '--format=csv'])
        """)),
    ]
    INVALID = [
        Invalid(snippet("""
            import pynvml
            h = pynvml.nvmlDeviceGetHandleByIndex(0)
            pynvml.nvmlDeviceSetGpuLockedClocks(h, 1980, 1980)
        """), line=3, message="`nvmlDeviceSetGpuLockedClocks` changes the GPU's clocks or settings"),
        Invalid(snippet("""
            from pynvml import *
            nvmlDeviceSetApplicationsClocks(handle, 2619, 1980)
        """), line=2, message="`nvmlDeviceSetApplicationsClocks` changes the GPU's clocks or settings"),
        Invalid(snippet("""
            import os
            os.system('nvidia-smi -lgc 1980,1980')
        """), line=2, message="`os.system` running `nvidia-smi -lgc 1980,1980` changes the GPU's clocks or settings"),
        Invalid(snippet("""
            import subprocess as sp
            sp.run(['sudo', 'nvidia-smi', '-pm', '1'])
        """), line=2, message="`subprocess.run` running `sudo nvidia-smi -pm 1` changes the GPU's clocks or settings"),
        Invalid(snippet("""
            src = '''
            #include <nvml.h>
            void boost(nvmlDevice_t d) { nvmlDeviceSetApplicationsClocks(d, 2619, 1980); }
            '''
        """), line=3, message="`nvmlDeviceSetApplicationsClocks` changes the GPU's clocks or settings"),
    ]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if "nvml" not in self.ctx.text:
            self.visit_Name = None  # type: ignore[assignment]  # no name here can start with it

    def visit_Name(self, node: cst.Name) -> None:
        if node.value.startswith("nvml") and NVML_SETTER.match(node.value):
            parent = self.ctx.parent(node)
            if type(parent) is cst.Attribute and parent.attr is node:
                self._report(parent, node.value)
            elif type(parent) not in (cst.ImportAlias, cst.FunctionDef, cst.Param):
                self._report(node, node.value)

    def visit_Call(self, node: cst.Call) -> None:
        func = resolve(self.ctx, node.func)
        if func and matches(func, PROCESS):
            strings = [s for arg in node.args for s in strings_in(self.ctx, arg.value)]
            if smi_setting(strings):
                self._report(node, f"`{func}` running `{' '.join(strings)[:80]}`", quote=False)

    def _report(self, node: cst.CSTNode, name: str, *, quote: bool = True) -> None:
        self.report(node, self.message.format(name=f"`{name}`" if quote else name), evidence={"name": name})

    def check_cpp(self, source: CppSource) -> None:
        setters = frozenset(n for n in cpp_ident_names(source) if n.startswith("nvml") and NVML_SETTER.match(n))
        for _, tok in cpp_idents(source, setters):
                self.report_cpp(source, tok.offset, self.message.format(name=f"`{tok.text}`")
                                + " (in the C++/CUDA source)", evidence={"name": tok.text})
        for index, tok in cpp_calls(source, _CPP_SHELL):
            strings, _ = cpp_call_strings(source, index)
            if smi_setting(strings):
                self.report_cpp(source, tok.offset, self.message.format(name="`nvidia-smi`") + " (in the C++/CUDA source)",
                                evidence={"command": " ".join(strings)})
