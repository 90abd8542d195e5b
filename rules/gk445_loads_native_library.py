from __future__ import annotations

from gatekeeper.report import Category, Severity
from gatekeeper.analyses.cpp_source import cpp_calls
from gatekeeper.analyses.harness_support import UseRule
from gatekeeper.static.cpp_sources import CppSource
from gatekeeper.static.examples import Invalid, Valid, snippet

CPP_LOADERS = frozenset({"dlopen", "dlmopen", "dlsym", "LoadLibrary", "LoadLibraryA", "LoadLibraryW",
                         "LoadLibraryExA", "LoadLibraryExW", "GetProcAddress", "cuModuleLoad",
                         "cuModuleLoadFatBinary", "cuLibraryLoadFromFile"})


class LoadsNativeLibrary(UseRule):
    """Loads a native library or a prebuilt binary: `ctypes.CDLL` / `PyDLL`,
    `ctypes.cdll.LoadLibrary`, `ctypes.util.find_library`, `ctypes.pythonapi`, anything
    from `cffi`, `torch.ops.load_library`, `torch.classes.load_library`, cuda-python's
    `cuModuleLoad`; in C++/CUDA sources `dlopen`, `dlsym`, `LoadLibrary`, `cuModuleLoad`
    (a cubin from a file).

    Why it games the benchmark: the code that runs is a binary no rule can read (a
    prebuilt cuBLAS call, a kernel with the shapes baked in, a patch of libc or libcuda),
    and `ctypes.pythonapi` reaches into the interpreter itself.

    Not flagged: other `ctypes` uses (`ctypes.c_void_p(x.data_ptr())` to pass a pointer),
    `torch.utils.cpp_extension.load` of the submission's own sources, and
    `cuModuleLoadData` of a PTX string compiled from source in the file (NVRTC).
    """

    code = "GK445"
    name = "LoadsNativeLibrary"
    category = Category.SANDBOX_ESCAPE
    severity = Severity.ERROR
    summary = "loads a native library or prebuilt binary (ctypes, cffi, dlopen)"
    message = "`{name}` loads native code the checks cannot read."
    hint = (
        "Write the kernel as CUDA/C++ source in the submission and build it with "
        "`torch.utils.cpp_extension.load_inline`; do not load shared libraries or cubins."
    )
    NAMES = ("ctypes.CDLL", "ctypes.PyDLL", "ctypes.WinDLL", "ctypes.OleDLL", "ctypes.cdll", "ctypes.pydll",
             "ctypes.windll", "ctypes.LibraryLoader", "ctypes.pythonapi", "ctypes.util", "_ctypes.dlopen",
             "cffi", "torch.ops.load_library", "torch.classes.load_library", "cuda.cuda.cuModuleLoad",
             "cuda.bindings.driver.cuModuleLoad", "os.add_dll_directory")
    VALID = [
        Valid(snippet("""
            import ctypes, torch
            x = torch.zeros(4)
            ptr = ctypes.c_void_p(x.data_ptr())
        """)),
        Valid(snippet("""
            from torch.utils.cpp_extension import load
            import os
            ext = load('k', sources=[os.path.join(os.path.dirname(__file__), 'k.cu')])
        """)),
    ]
    INVALID = [
        Invalid(snippet("""
            import ctypes
            lib = ctypes.CDLL('/usr/lib/x86_64-linux-gnu/libcublas.so')
        """), line=2, message="`ctypes.CDLL` loads native code the checks cannot read"),
        Invalid(snippet("""
            from ctypes import cdll
            cu = cdll.LoadLibrary('libcuda.so.1')
        """), line=2, message="`ctypes.cdll.LoadLibrary` loads native code the checks cannot read"),
        Invalid(snippet("""
            import cffi
            ffi = cffi.FFI()
            lib = ffi.dlopen('libm.so.6')
        """), line=2, message="`cffi.FFI` loads native code the checks cannot read"),
        Invalid(snippet("""
            import torch
            torch.ops.load_library('prebuilt_kernel.so')
        """), line=2, message="`torch.ops.load_library` loads native code the checks cannot read"),
        Invalid(snippet("""
            src = '''
            #include <dlfcn.h>
            void* h() { return dlopen("libcublasLt.so", RTLD_NOW); }
            '''
        """), line=3, message="`dlopen()` loads native code the checks cannot read"),
    ]

    def check_cpp(self, source: CppSource) -> None:
        for _, tok in cpp_calls(source, CPP_LOADERS):
            self.report_cpp(source, tok.offset, self.message.format(name=f"{tok.text}()") + " (in the C++/CUDA source)",
                            evidence={"name": tok.text})
