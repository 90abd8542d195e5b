from __future__ import annotations

from gatekeeper.report import Category, Severity
from gatekeeper.analyses.cpp_source import cpp_calls
from gatekeeper.analyses.harness_support import UseRule
from gatekeeper.static.cpp_sources import CppSource

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
        "import ctypes, torch\nx = torch.zeros(4)\nptr = ctypes.c_void_p(x.data_ptr())\n",
        "from torch.utils.cpp_extension import load\nimport os\n"
        "ext = load('k', sources=[os.path.join(os.path.dirname(__file__), 'k.cu')])\n",
    ]
    INVALID = [
        "import ctypes\nlib = ctypes.CDLL('/usr/lib/x86_64-linux-gnu/libcublas.so')\n",
        "from ctypes import cdll\ncu = cdll.LoadLibrary('libcuda.so.1')\n",
        "import cffi\nffi = cffi.FFI()\nlib = ffi.dlopen('libm.so.6')\n",
        "import torch\ntorch.ops.load_library('prebuilt_kernel.so')\n",
        "src = '''\n#include <dlfcn.h>\nvoid* h() { return dlopen(\"libcublasLt.so\", RTLD_NOW); }\n'''\n",
    ]

    def check_cpp(self, source: CppSource) -> None:
        for _, tok in cpp_calls(source, CPP_LOADERS):
            self.report_cpp(source, tok.offset, self.message.format(name=f"{tok.text}()") + " (in the C++/CUDA source)",
                            evidence={"name": tok.text})
