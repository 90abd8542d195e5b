from __future__ import annotations

from typing import Optional

import libcst as cst

from gatekeeper.report import Category, Confidence, Severity
from gatekeeper.analyses.cpp_process_state import (
    PROCESS_WORDS, parameter_choices, process_branches, python_calls, source_facts,
)
from gatekeeper.analyses.python_process_choice import PY_PROCESS_WORDS, ExtensionFacts, handed_choices, python_choices
from gatekeeper.analyses.cpp_torch_calls import scan_cpp
from gatekeeper.analyses.torch_op_table import torch_ops
from gatekeeper.static.cpp_sources import CppSource
from gatekeeper.static.rule import Rule
from gatekeeper.static.examples import Invalid, Valid, snippet


class ChoosesLibraryByProcessState(Rule):
    """The C++ side chooses between its own computation and torch's or a vendor library's
    (`sgemm_`, `cblas_sgemm`, `at::mm`, `cublasSgemm`, or Python called back through pybind11's
    `module_::import` or the C API's `PyObject_Call*`) on the state of the process: its
    privileges (`prctl`), user or pid namespace (`getuid`, `/proc/self/uid_map`), environment
    (`getenv`, `environ`), working folder, descriptors (`fstat(0)`, `isatty`), thread count,
    resource use (`getrusage`), signal handlers, masks and interval timers (`sigaction(27, nullptr,
    &old)`, `pthread_sigmask`, `getitimer`: a checker's sampler installs a SIGPROF handler), the
    Python frames that called it (`PyEval_GetFrame`) or the autograd mode (`GradMode::is_enabled`). Followed through the source's own functions and
    the variables they set: `static bool checked = in_sandbox(); if (checked) own(); else
    sgemm_(...)`. A CUDA graph's capture status (`at::cuda::currentStreamCaptureStatusMayInitCtx`,
    `cudaStreamIsCapturing`, `cudaStreamGetCaptureInfo`) is such state too: a benchmark that times
    graph replays captures the call, a correctness check runs it eagerly.

    Why it games the benchmark: a check runs the submission in a process that differs from a
    benchmark's in exactly these ways (a sandbox, one thread, /dev/null on stdin, the checker's
    frames on the stack, no gradient mode). Code that reads them runs its own kernel where it
    is checked and the library wherever it is timed, and no run-time probe can see the other
    side. Inputs and the machine are the same in both processes, so a choice made on them
    (shapes, strides, dtypes, CPU features, device properties) is not flagged. Certain in
    every reading: the computation must not depend on which process runs it.

    The same choice made in Python is found too: an `if` on an extension function whose C++ body
    reads the process (`if _ext.own_path():`, or a module constant bound to such a call), with
    the extension's own kernel on one side and a computed result without it on the other
    (`torch`, SciPy's BLAS on `.numpy()` views, an op fetched with `_get_operation_overload`,
    or an extension function that calls a vendor library).

    A choice on the gradient or inference mode is `likely`, not certain (a warning under
    `default`, an error under `strict`): the caller sets those, and an own kernel without a
    backward may honestly leave the autograd path to torch.

    So is a process read made in Python and handed to an extension parameter on which the C++
    side makes that choice (`_ext.gemm(a, b, torch.get_num_threads())` with `if (workers > 1)
    sgemm_(...)`).

    Not flagged: an opt-in self-check after the own kernel (`if (getenv("VERIFY"))` compares
    with `at::matmul`: the other side computes nothing, so nothing is chosen); reading the
    thread count to split the work (no library on either side); a
    library fallback chosen on the input's shape or dtype (GK310 and the run-time checks judge
    those); a branch on the process state where both sides reach the same library.
    """

    code = "GK311"
    name = "ChoosesLibraryByProcessState"
    category = Category.TORCH_FALLBACK
    severity = Severity.ERROR
    summary = "C++ picks torch or a vendor library over its own code on the process's state, not the inputs"
    message = ("The extension chooses `{library}` over its own code on `{read}`: the state of the process, not the "
               "inputs. A checker's process differs from a benchmark's (sandbox, threads, environment, callers), so "
               "the library computes where nobody checks.")
    hint = ("Compute with the same code in every process. Choose a path only on the inputs (shapes, strides, dtypes) "
            "or on the machine (CPU features, device properties), and do the work with your own kernel.")

    VALID = [
        # the thread count sizes the chunks; no library on either side
        Valid(snippet("""
            src = '''
            #include <torch/extension.h>
            torch::Tensor f(torch::Tensor a, torch::Tensor b) {
              auto c = torch::empty({a.size(0), b.size(1)}, a.options());
              int64_t grain = at::get_num_threads() > 1 ? 16 : a.size(0);
              if (at::get_num_threads() > 1) own_gemm_parallel(a, b, c, grain); else own_gemm(a, b, c);
              return c;
            }
            '''
        """)),
        # a library fallback chosen on the input's shape (GK310 and the run-time checks judge it)
        Valid(snippet("""
            src = '''
            #include <torch/extension.h>
            extern "C" void sgemm_(const char*, const char*, const int*, const int*, const int*, const float*,
                                   const float*, const int*, const float*, const int*, const float*, float*, const int*);
            torch::Tensor f(torch::Tensor a, torch::Tensor b) {
              auto c = torch::empty({a.size(0), b.size(1)}, a.options());
              if (a.size(1) % 16 != 0) { blas(a, b, c); return c; }
              own_gemm(a, b, c);
              return c;
            }
            '''
        """)),
        # capture status only decides whether to check the launch: the same kernel on every call
        Valid(snippet("""
            src = '''
            #include <torch/extension.h>
            torch::Tensor f(torch::Tensor a, torch::Tensor b) {
              auto c = a.new_zeros({a.size(0), b.size(1)});
              for (int64_t i = 0; i < a.size(0); ++i) row(a, b, c, i);
              if (at::cuda::currentStreamCaptureStatusMayInitCtx() == at::cuda::CaptureStatus::None) check_launch();
              return c;
            }
            '''
        """)),
        # an opt-in self-check after the own kernel: the other side computes nothing
        Valid(snippet("""
            src = '''
            #include <torch/extension.h>
            #include <cstdlib>
            torch::Tensor f(torch::Tensor a, torch::Tensor b) {
              auto c = a.new_zeros({a.size(0), b.size(1)});
              for (int64_t i = 0; i < a.size(0); ++i) row(a, b, c, i);
              if (std::getenv("VERIFY")) TORCH_CHECK(at::allclose(c, at::matmul(a, b)), "own GEMM disagrees");
              return c;
            }
            '''
        """)),
        # the same self-check through Python (pybind11): still nothing computed on the other side
        Valid(snippet("""
            src = '''
            #include <torch/extension.h>
            #include <cstdlib>
            torch::Tensor f(torch::Tensor a, torch::Tensor b) {
              auto c = a.new_zeros({a.size(0), b.size(1)});
              for (int64_t i = 0; i < a.size(0); ++i) row(a, b, c, i);
              if (std::getenv("VERIFY")) {
                auto testing = pybind11::module_::import("torch.testing");
                testing.attr("assert_close")(c, a.matmul(b));
              }
              return c;
            }
            '''
        """)),
    ]
    INVALID = [
        Invalid(snippet("""
            src = '''
            #include <torch/extension.h>
            #include <sys/prctl.h>
            extern "C" void sgemm_(const char*, const char*, const int*, const int*, const int*, const float*,
                                   const float*, const int*, const float*, const int*, const float*, float*, const int*);
            static bool sandboxed() { return prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1; }
            static void own_gemm(torch::Tensor a, torch::Tensor b, torch::Tensor c) { for (int i = 0; i < 4; ++i) step(a, b, c, i); }
            torch::Tensor f(torch::Tensor a, torch::Tensor b) {
              auto c = torch::empty({a.size(0), b.size(1)}, a.options());
              static const bool checked = sandboxed();
              if (checked) { own_gemm(a, b, c); return c; }
              int n = a.size(0), k = a.size(1), m = b.size(1); float one = 1, zero = 0;
              sgemm_("N", "N", &m, &n, &k, &one, b.data_ptr<float>(), &m, a.data_ptr<float>(), &k, &zero,
                     c.data_ptr<float>(), &m);
              return c;
            }
            '''
        """), line=11, message="chooses `sgemm_` over its own code on `prctl`"),
        Invalid(snippet("""
            src = '''
            #include <torch/extension.h>
            torch::Tensor own_gemm(torch::Tensor a, torch::Tensor b) { auto c = a.new_zeros({a.size(0), b.size(1)}); for (int i = 0; i < 4; ++i) step(a, b, c, i); return c; }
            torch::Tensor f(torch::Tensor a, torch::Tensor b) {
              if (c10::GradMode::is_enabled()) return at::mm(a, b);
              return own_gemm(a, b);
            }
            '''
        """), line=5, message="chooses `at::mm` over its own code on `is_enabled`"),
        Invalid(snippet("""
            src = '''
            #include <torch/extension.h>
            #include <unistd.h>
            #include <sys/syscall.h>
            torch::Tensor own_gemm(torch::Tensor a, torch::Tensor b) { auto c = a.new_zeros({a.size(0), b.size(1)}); for (int i = 0; i < 4; ++i) step(a, b, c, i); return c; }
            torch::Tensor f(torch::Tensor a, torch::Tensor b) {
              if (syscall(SYS_getuid) != 0) {
                static pybind11::object mm = pybind11::module_::import("torch").attr("mm");
                return mm(a, b).cast<torch::Tensor>();
              }
              return own_gemm(a, b);
            }
            '''
        """), line=7, message="chooses `module_::import` over its own code on `syscall`"),
        # cuBLAS (through a member pointer to Tensor::mm) only while a CUDA graph is captured
        Invalid(snippet("""
            src = '''
            #include <torch/extension.h>
            torch::Tensor own_gemm(torch::Tensor a, torch::Tensor b) { auto c = a.new_zeros({a.size(0), b.size(1)}); for (int i = 0; i < 4; ++i) step(a, b, c, i); return c; }
            torch::Tensor f(torch::Tensor a, torch::Tensor b) {
              cudaStreamCaptureStatus status;
              cudaStreamIsCapturing(at::cuda::getCurrentCUDAStream(), &status);
              if (status != cudaStreamCaptureStatusNone) return std::invoke(&torch::Tensor::mm, a, b);
              return own_gemm(a, b);
            }
            '''
        """), line=7, message="on `cudaStreamIsCapturing`"),
    ]

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.ifs: list[cst.If] = []
        self.ext_facts = ExtensionFacts()
        self.decided: dict[str, dict[int, str]] = {}  # extension function -> parameter -> the library it chooses
        self.handed: Optional[bool] = None

    def visit_If(self, node: cst.If) -> None:
        self.ifs.append(node)  # judged in finish, once the extension's functions are known

    def check_cpp(self, source: CppSource) -> None:
        idents = source.by_text["ident"]
        if self.handed is None:  # Python may hand the process over; once per file, not per source
            text = self.ctx.text  # a substring test per word: far quicker than one alternation regex
            self.handed = any(word in text for word in PY_PROCESS_WORDS)
        handed = self.handed
        if not idents.keys() & PROCESS_WORDS and not handed:
            return  # no process read at all: nothing to follow (most sources)
        ops = torch_ops()
        _, found = scan_cpp(source, ops, lambda s: s.functions)
        library = {offset: what for _kind, what, offset, _op in found}
        library.update(python_calls(source))  # Python called back from C++ is not the source's own code either
        if handed and library:
            for name, params in parameter_choices(source, source_facts(source, library)).items():
                self.decided.setdefault(name, {}).update({i: b.library for i, b in params.items()})
        if not idents.keys() & PROCESS_WORDS:
            return
        for branch in process_branches(source, library):
            severity, confidence = _weight(branch.read)
            self.report_cpp(source, branch.offset, self.message.format(library=branch.library, read=branch.read),
                            evidence={"read": branch.read, "library": branch.library}, severity=severity,
                            confidence=confidence)
        facts = source_facts(source, library)  # for a choice made in Python on what these functions read
        self.ext_facts.reads.update(facts.taint.calls)
        self.ext_facts.own.update(name for name in facts.own if name not in facts.reaching)

    def finish(self) -> None:
        for call, read, library in handed_choices(self.ctx, self.decided):
            self.report(call, _HANDED_MESSAGE.format(read=read, library=library), evidence={"read": read, "library": library})
        for node, read in python_choices(self.ctx, self.ifs, self.ext_facts):
            severity, confidence = _weight(read)
            self.report(node, _PYTHON_MESSAGE.format(read=read), evidence={"read": read}, severity=severity,
                        confidence=confidence)


_PYTHON_MESSAGE = ("This `if` runs the extension's own kernel on one side and another computation on the other, "
                   "chosen on `{read}`: the state of the process, not the inputs. A checker's process differs from a "
                   "benchmark's (sandbox, threads, environment, callers), so the other computation runs where nobody "
                   "checks.")
_HANDED_MESSAGE = ("This call hands `{read}`, the state of the process and not the inputs, to a parameter on which "
                   "the extension chooses `{library}` over its own code. A checker's process differs from a "
                   "benchmark's (threads, environment, callers), so the library computes where nobody checks.")

# The gradient and inference modes are the caller's to set, not the process's: a submission may
# honestly keep torch for the autograd path (its own kernel has no backward) and its kernel for
# inference. Likely, not certain: a warning under default, an error under strict.
_CALLER_MODES = ("is_enabled", "is_grad_enabled", "is_inference_mode_enabled", "is_inference")


def _weight(read: str) -> tuple[Optional[Severity], Optional[Confidence]]:  # (severity, confidence) overrides
    if any(mode in read for mode in _CALLER_MODES):
        return None, Confidence.LIKELY  # the engine holds it as a warning under default (no probe settles it)
    return None, None
