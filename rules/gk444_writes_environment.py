from __future__ import annotations

from typing import Optional

import libcst as cst

from gatekeeper.report import Category, Severity
from gatekeeper.analyses.cpp_source import cpp_call_strings, cpp_calls
from gatekeeper.analyses.harness_support import literal, resolve, subscript_key
from gatekeeper.static.syntax import argument
from gatekeeper.static.cpp_sources import CppSource
from gatekeeper.static.rule import Rule
from gatekeeper.static.examples import Invalid, Valid, snippet

# Variables read only by the build toolchain (which compiler, which flags and targets, where
# builds are cached, what the JIT front end accepts): a warning, not an error. Nothing reads
# them while the kernels run, so they cannot change what is timed. Runtime switches of the
# same families stay errors below (TRITON_INTERPRET runs kernels in the CPU interpreter,
# TRITON_F32_DEFAULT changes precision, PYTORCH_CUDA_ALLOC_CONF the allocator).
BUILD_VARIABLES = frozenset({
    # torch.utils.cpp_extension
    "TORCH_CUDA_ARCH_LIST", "TORCH_EXTENSIONS_DIR", "MAX_JOBS", "CUDA_HOME", "CUDA_PATH", "CUDA_ROOT", "CC",
    "CXX", "CUDAHOSTCXX", "NVCC_APPEND_FLAGS", "NVCC_PREPEND_FLAGS", "NVCC_CCBIN", "TORCH_NVCC_FLAGS",
    "PYTORCH_NVCC", "TORCH_DONT_CHECK_COMPILER_ABI", "CPATH", "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH",
    "LIBRARY_PATH", "CUTLASS_PATH", "CUTLASS_DIR",
    # Triton's compiler and JIT front end
    "TRITON_CACHE_DIR", "TRITON_HOME", "TRITON_ALLOW_NON_CONSTEXPR_GLOBALS", "TRITON_PTXAS_PATH",
    "TRITON_CUOBJDUMP_PATH", "TRITON_NVDISASM_PATH", "TRITON_LIBDEVICE_PATH", "TRITON_LIBCUDA_PATH",
    "TRITON_DISABLE_LINE_INFO", "TRITON_KERNEL_DUMP", "TRITON_DUMP_DIR", "TRITON_PRINT_AUTOTUNING",
})
# Variables known to change how the work runs, is scheduled or is timed: an error. The
# prefixes name families the CUDA runtime, its libraries, PyTorch and the loader read.
RUNTIME_VARIABLES = frozenset({
    "CUDA_LAUNCH_BLOCKING", "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_MAX_CONNECTIONS", "CUDA_DEVICE_ORDER",
    "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE",
    "TORCH_BLAS_PREFER_CUBLASLT", "TORCH_BLAS_PREFER_HIPBLASLT", "TORCH_CUDNN_V8_API_DISABLED",
})
RUNTIME_PREFIXES = ("CUDA_", "CUBLAS", "CUDNN", "NVIDIA_", "PYTORCH_", "NCCL_", "LD_", "TORCHINDUCTOR_",
                    "TRITON_", "KMP_", "GOMP_", "PYTHON")
# Runtime variables that act before anything is timed (module loading): a warning.
LOAD_TIME_VARIABLES = frozenset({"CUDA_MODULE_LOADING"})
_ENVIRON = ("os.environ", "os.environb")
_MUTATORS = ("update", "setdefault", "pop", "popitem", "clear", "__setitem__", "__delitem__")


class WritesEnvironment(Rule):
    """Writes environment variables: `os.environ[k] = v`, `del os.environ[k]`,
    `os.environ.update/setdefault/pop(...)`, `os.environ |= {...}`, `os.putenv`,
    `os.unsetenv`, `mock.patch.dict(os.environ, ...)`; in C++/CUDA sources `setenv`,
    `putenv`, `unsetenv`.

    Why it games the benchmark: the environment is shared with the harness and the CUDA
    runtime: `CUDA_LAUNCH_BLOCKING`, `CUDA_VISIBLE_DEVICES`, `PYTORCH_CUDA_ALLOC_CONF`,
    `NVIDIA_TF32_OVERRIDE` or `CUBLAS_WORKSPACE_CONFIG` change how everything after it runs
    and is timed.

    An error for the variables known to change how work runs or is timed (`CUDA_*`,
    `CUBLAS*`, `CUDNN*`, `NVIDIA_*`, `PYTORCH_*`, `NCCL_*`, `LD_*`, `TRITON_*`, thread
    counts, torch's TF32/cuBLASLt switches) and for a name computed at run time. A warning
    for variables that only the build toolchain reads (`TORCH_CUDA_ARCH_LIST`, `MAX_JOBS`,
    `CUDA_HOME`, `CXX`, `PYTORCH_NVCC`, `TORCH_EXTENSIONS_DIR`, `NVCC_APPEND_FLAGS`, Triton's
    compiler paths, `TRITON_ALLOW_NON_CONSTEXPR_GLOBALS`...: harmless to the measurement, but
    the harness sets them; Triton's runtime switches such as `TRITON_INTERPRET` stay errors), for `CUDA_MODULE_LOADING` (it acts when
    kernels are loaded, before anything is timed) and for names nothing is known to read.

    Known false-positive pattern, a warning: a lazy loader that sets a verbosity flag of
    its own naming before `load_inline` (`os.environ['TORCH_CUDA_VERBOSE'] = '0'`; no
    library reads it). Reading the environment is not flagged (`os.environ.get`), nor is a
    copy of it (`env = dict(os.environ)`).
    """

    code = "GK444"
    name = "WritesEnvironment"
    category = Category.SANDBOX_ESCAPE
    severity = Severity.ERROR
    summary = "writes environment variables"
    message = "`{how}` sets the environment variable {var}: {why}"
    hint = (
        "Do not change the environment. Pass build options to `load_inline` directly "
        "(`extra_cuda_cflags=['-arch=sm_90']`) and leave runtime variables to the harness."
    )
    VALID = [
        Valid(snippet("""
            import os
            debug = os.environ.get('MY_DEBUG') == '1'
        """)),
        Valid(snippet("""
            import os
            env = dict(os.environ)
            env['X'] = '1'
        """)),
    ]
    INVALID = [
        Invalid(snippet("""
            import os
            os.environ['CUDA_LAUNCH_BLOCKING'] = '0'
        """), line=2, message="`os.environ[...] =` sets the environment variable `CUDA_LAUNCH_BLOCKING`"),
        Invalid(snippet("""
            from os import environ as E
            E.update({'PYTORCH_CUDA_ALLOC_CONF': 'expandable_segments:True'})
        """), line=2, message="`os.environ.update` sets the environment variable `PYTORCH_CUDA_ALLOC_CONF`"),
        Invalid(snippet("""
            import os
            os.putenv('NVIDIA_TF32_OVERRIDE', '1')
        """), line=2, message="`os.putenv` sets the environment variable `NVIDIA_TF32_OVERRIDE`"),
        Invalid(snippet("""
            import os
            key = 'CUDA_' + 'VISIBLE_DEVICES'
            os.environ[key] = '1'
        """), line=3, message="`os.environ[...] =` sets the environment variable <computed>"),
        Invalid(snippet("""
            src = '''
            #include <cstdlib>
            void f() { setenv("CUDA_DEVICE_MAX_CONNECTIONS", "1", 1); }
            '''
        """), line=3, message="`setenv()` sets the environment variable `CUDA_DEVICE_MAX_CONNECTIONS`"),
    ]

    # Warnings, not errors (tests/test_environment_writes.py checks the severities):
    INVALID += [
        Invalid(snippet("""
            import os
            os.environ['TORCH_CUDA_ARCH_LIST'] = '9.0'
        """), line=2, message="a build setting the harness already controls"),
        Invalid(snippet("""
            import os
            os.environ['TORCH_CUDA_VERBOSE'] = '0'
        """), line=2, message="no library gatekeeper knows reads it"),
        Invalid(snippet("""
            import os
            os.environ['PYTORCH_NVCC'] = '/usr/local/cuda/bin/nvcc'
            os.environ.setdefault('TRITON_ALLOW_NON_CONSTEXPR_GLOBALS', '1')
        """), line=2, message="only the build toolchain reads it"),
    ]
    # an error in the same family: Triton's interpreter changes how the kernels run
    INVALID += [
        Invalid(snippet("""
            import os
            os.environ['TRITON_INTERPRET'] = '1'
        """), line=2, message="it changes how the work runs or is timed"),
    ]

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self._target(target.target, node, "os.environ[...] =")

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        if resolve(self.ctx, node.target) in _ENVIRON:
            self._vars(node, "os.environ |=", node.value)
        else:
            self._target(node.target, node, "os.environ[...] +=")

    def visit_Del(self, node: cst.Del) -> None:
        self._target(node.target, node, "del os.environ[...]")

    def _target(self, target: cst.BaseExpression, node: cst.CSTNode, how: str) -> None:
        if type(target) is cst.Subscript and resolve(self.ctx, target.value) in _ENVIRON:
            self._var(node, how, subscript_key(self.ctx, target))

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        qual = resolve(self.ctx, func)
        if qual in ("os.putenv", "os.unsetenv"):
            self._var(node, qual, literal(self.ctx, argument(node, 0)))
        elif type(func) is cst.Attribute and func.attr.value in _MUTATORS and resolve(self.ctx, func.value) in _ENVIRON:
            how = f"os.environ.{func.attr.value}"
            if func.attr.value in ("setdefault", "pop", "__setitem__", "__delitem__"):
                self._var(node, how, literal(self.ctx, argument(node, 0)))
            else:
                self._vars(node, how, argument(node, 0), node)
        elif type(func) is cst.Attribute and func.attr.value == "dict" and type(func.value) in (cst.Name, cst.Attribute):
            if resolve(self.ctx, argument(node, 0, "in_dict")) in _ENVIRON or literal(self.ctx, argument(node, 0)) == "os.environ":
                self._vars(node, "mock.patch.dict(os.environ)", argument(node, 1, "values"), node)

    def _vars(self, node: cst.CSTNode, how: str, mapping: Optional[cst.BaseExpression], call: Optional[cst.Call] = None) -> None:
        keys: list[Optional[str]] = []
        if type(mapping) is cst.Dict:
            keys = [literal(self.ctx, e.key) if (type(e) is cst.DictElement) else None for e in mapping.elements]
        elif mapping is not None:
            keys = [None]
        if call is not None:
            keys += [a.keyword.value for a in call.args if a.keyword is not None and a.keyword.value not in ("in_dict", "values")]
        for key in keys or [None]:
            self._var(node, how, key)

    def _var(self, node: cst.CSTNode, how: str, key: Optional[str]) -> None:
        message, severity = self._describe(how, key)
        self.report(node, message, evidence={"variable": key}, severity=severity)

    def _describe(self, how: str, key: Optional[str]) -> tuple[str, Optional[Severity]]:
        if key in BUILD_VARIABLES:
            why = ("a build setting the harness already controls: only the build toolchain reads it (compiler, "
                   "flags, targets, cache), not the timed kernels; pass flags to `load_inline` instead.")
            severity: Optional[Severity] = Severity.WARNING if self.active_severity == Severity.ERROR else None
        elif key is None:
            why = "the name is computed, and the environment steers the CUDA runtime and the harness."
            severity = None
        elif key in LOAD_TIME_VARIABLES:
            why = "it changes when kernels are loaded (before anything is timed); leave it to the harness."
            severity = Severity.WARNING if self.active_severity == Severity.ERROR else None
        elif key in RUNTIME_VARIABLES or key.startswith(RUNTIME_PREFIXES):
            why = "the CUDA runtime, its libraries or torch read it: it changes how the work runs or is timed."
            severity = None
        else:
            why = ("no library gatekeeper knows reads it, but the environment is shared with the CUDA runtime "
                   "and the build; remove it.")
            severity = Severity.WARNING if self.active_severity == Severity.ERROR else None
        return self.message.format(how=how, var=f"`{key}`" if key else "<computed>", why=why), severity

    def check_cpp(self, source: CppSource) -> None:
        for index, tok in cpp_calls(source, frozenset({"setenv", "putenv", "unsetenv", "_putenv", "_putenv_s"})):
            strings, _ = cpp_call_strings(source, index)
            key = strings[0].split("=")[0] if strings else None
            message, severity = self._describe(f"{tok.text}()", key)
            self.report_cpp(source, tok.offset, message + " (in the C++/CUDA source)", evidence={"variable": key},
                            severity=severity)
