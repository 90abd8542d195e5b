from __future__ import annotations

from typing import Optional, Sequence

from gatekeeper.report import Category, Confidence, Severity
from gatekeeper.analyses.stream_support import function_at, idents
from gatekeeper.static.cpp_sources import CppSource
from gatekeeper.static.cpp_tokens import Token
from gatekeeper.static.rule import Rule
from gatekeeper.static.examples import Invalid, Valid, snippet

_STD_STARTERS = frozenset({"thread", "jthread", "async"})
_C_STARTERS = frozenset({"pthread_create", "thrd_create", "_beginthreadex", "CreateThread"})
_DETACH = frozenset({"detach", "pthread_detach", "thrd_detach"})
# What joins each kind of thread (a std::jthread joins itself when it goes out of scope).
_JOINS = {
    "std::thread": frozenset({"join"}), "std::jthread": frozenset({"join", "request_stop"}),
    "std::async": frozenset({"get", "wait", "wait_for"}), "pthread_create": frozenset({"pthread_join"}),
    "thrd_create": frozenset({"thrd_join"}), "_beginthreadex": frozenset({"WaitForSingleObject"}),
    "CreateThread": frozenset({"WaitForSingleObject"}),
}
# `std::thread::hardware_concurrency()`, `std::thread::id`: queries, not starts.
_STD_MEMBERS = frozenset({"hardware_concurrency", "id", "native_handle_type"})
_TRIGGERS = _STD_STARTERS | _C_STARTERS | _DETACH


class StartsCppThread(Rule):
    """The C++ source starts a thread: `std::thread`, `std::jthread`, `std::async`,
    `pthread_create` (or C11 `thrd_create`), and one it does not join before the host function
    returns is an error, as is any `.detach()` / `pthread_detach`.

    Why it games the benchmark: a detached or unjoined thread keeps running after the
    extension call returns, so the kernel launch (or the CPU work) it does escapes the timed
    region and may complete after the output was compared, or race with the harness.

    Not flagged: OpenMP (`#pragma omp parallel`, `parallel for`): a parallel region joins its
    threads at its end, before the function can return, so it is ordinary CPU parallelism.
    A thread that is started and joined (`.join()`, `pthread_join`, or the future of
    `std::async` waited with `.get()` / `.wait()`) later in the same function is reported as
    a warning only, because nothing is left running; `std::thread::hardware_concurrency()` is
    a query and is not reported. A thread object with static storage (`static std::thread
    worker(serve);`), never detached, is a persistent worker: `likely`, a warning under `default`
    until the output check after return (GK675) confirms that work finished after the call.
    """

    code = "GK511"
    name = "StartsCppThread"
    category = Category.THREAD_INJECTION
    severity = Severity.ERROR
    summary = "starts a C++ thread that is detached or not joined before returning"
    message = (
        "`{name}` in the C++ source starts a thread that is {how} before the host function returns: "
        "its work runs on after the call, outside the timed region and after the output is checked."
    )
    joined_message = (
        "`{name}` in the C++ source starts a thread; it is joined before the host function returns, so "
        "nothing escapes, but threads in a kernel submission are unusual: prefer the GPU or OpenMP."
    )
    persistent_message = (
        "`{name}` in the C++ source starts a thread kept for the whole process (static storage), never joined: "
        "a worker that forward waits for is honest, one whose work finishes after the call returns is not; the "
        "check of the output after return (GK675) decides."
    )
    confirmed_by = "GK675"
    hint = (
        "Do the work in the kernel launch itself, on the current stream. For CPU parallelism use "
        "`#pragma omp parallel for`, whose threads join at the end of the loop; never detach a thread."
    )
    VALID = [
        Valid(snippet("""
            src = r'''
            #include <omp.h>
            torch::Tensor f(torch::Tensor x) {
              auto y = torch::empty_like(x);
              float* py = y.data_ptr<float>(); const float* px = x.data_ptr<float>();
              #pragma omp parallel for
              for (long i = 0; i < x.numel(); ++i) py[i] = px[i] * 2.f;
              return y;
            }
            '''
        """)),
        Valid(snippet("""
            src = r'''
            #include <thread>
            torch::Tensor f(torch::Tensor x) {
              int n = std::thread::hardware_concurrency();
              return x.mul(n);
            }
            '''
        """)),
        Valid(snippet("""
            src = r'''
            torch::Tensor f(torch::Tensor x, torch::Tensor w) {
              auto wc = w.detach().contiguous();  // a tensor's detach: no thread
              return own_linear(x, wc);
            }
            '''
        """)),
    ]
    INVALID = [
        Invalid(snippet("""
            src = '''
            #include <thread>
            static void serve();
            torch::Tensor f(torch::Tensor x) {
              static std::thread worker(serve);
              return post_and_wait(x);
            }
            '''
        """), line=5, message="starts a thread kept for the whole process"),
        Invalid(snippet("""
            src = r'''
            #include <thread>
            torch::Tensor f(torch::Tensor x, torch::Tensor y) {
              std::thread t([=] { run(x, y); });
              t.detach();
              return y;
            }
            '''
        """), line=5, message="`detach` in the C++ source starts a thread that is detached and never joined"),
        Invalid(snippet("""
            src = r'''
            #include <pthread.h>
            static void* worker(void* p) { finish(p); return nullptr; }
            torch::Tensor f(torch::Tensor y) {
              pthread_t tid;
              pthread_create(&tid, nullptr, worker, y.data_ptr());
              return y;
            }
            '''
        """), line=6, message="`pthread_create` in the C++ source starts a thread that is not joined"),
        Invalid(snippet("""
            src = r'''
            #include <future>
            static std::future<void> pending;
            torch::Tensor f(torch::Tensor y) {
              pending = std::async(std::launch::async, [=] { run(y); });
              return y;
            }
            '''
        """), line=5, message="`std::async` in the C++ source starts a thread that is not joined"),
    ]

    def check_cpp(self, source: CppSource) -> None:
        if not idents(source) & _TRIGGERS:
            return
        tokens = source.tokens
        # `x.detach()` is a thread's only where the source makes threads at all: a tensor's
        # `w.detach()` (at::Tensor::detach) starts nothing (red team round 13's honest twin)
        makes_threads = bool(idents(source) & (_STD_STARTERS | _C_STARTERS))
        funcs = None
        for i, tok in enumerate(tokens):
            if tok.kind != "ident":
                continue
            name = self._starter(tokens, i)
            if name is None:
                if tok.text in _DETACH and _is_call(tokens, i) and (makes_threads or tok.text != "detach"):
                    self.report_cpp(source, tok.offset, self.message.format(name=tok.text, how="detached and never joined"),
                                    evidence={"starts": tok.text, "joined": False})
                continue
            if funcs is None:
                funcs = source.functions
            fn = function_at(funcs, i)
            end = fn.body_end if fn is not None else len(tokens)
            joins = _JOINS.get(name, frozenset())
            joined = name == "std::jthread" or any(
                t.kind == "ident" and t.text in joins and _is_call(tokens, j)
                for j, t in enumerate(tokens[i + 1 : end], start=i + 1))
            detached = any(t.kind == "ident" and t.text in _DETACH for t in tokens[i + 1 : end])
            if joined and not detached:
                self.report_cpp(source, tok.offset, self.joined_message.format(name=name),
                                evidence={"starts": name, "joined": True},
                                severity=Severity.WARNING if self.active_severity == Severity.ERROR else self.active_severity)
            elif not detached and _persistent(tokens, i):
                # A worker kept for the process (`static std::thread w(serve);`): an honest pool
                # that forward hands work to and waits for is one reading, work that finishes
                # after the call another. The output check after return (GK675) settles it.
                self.report_cpp(source, tok.offset, self.persistent_message.format(name=name),
                                evidence={"starts": name, "joined": False, "persistent": True},
                                confidence=Confidence.LIKELY)
            elif not detached:  # a detach is reported where it is
                self.report_cpp(source, tok.offset, self.message.format(name=name, how="not joined"),
                                evidence={"starts": name, "joined": False})

    @staticmethod
    def _starter(tokens: Sequence[Token], i: int) -> Optional[str]:
        text = tokens[i].text
        if text in _C_STARTERS:
            return text if _is_call(tokens, i) else None
        if text in _STD_STARTERS and i >= 2 and tokens[i - 1].text == "::" and tokens[i - 2].text == "std":
            nxt = tokens[i + 1].text if i + 1 < len(tokens) else ""
            after = tokens[i + 2].text if i + 2 < len(tokens) else ""
            if nxt == "::" and after in _STD_MEMBERS:
                return None
            if text == "thread" and nxt == "::":
                return None  # std::thread::something else: a member, not a start
            return f"std::{text}"
        return None


def _is_call(tokens: Sequence[Token], i: int) -> bool:
    return i + 1 < len(tokens) and tokens[i + 1].text == "("


def _persistent(tokens: Sequence[Token], i: int) -> bool:
    """Whether the thread started at token i is a `static` object (`static std::thread w(f);`):
    the declaration it belongs to, back to the previous statement's end, says `static`."""
    j = i - 1
    while j >= 0 and tokens[j].text not in (";", "{", "}"):
        if tokens[j].text == "static":
            return True
        j -= 1
    return False
