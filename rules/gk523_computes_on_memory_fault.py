from __future__ import annotations

import libcst as cst

from gatekeeper.report import Category, Severity
from gatekeeper.static.cpp_sources import CppSource
from gatekeeper.static.rule import Rule
from gatekeeper.static.examples import Invalid, Valid, snippet

_FAULTS = frozenset({"SIGSEGV", "SIGBUS"})
_INSTALLERS = frozenset({"sigaction", "signal", "sigset", "bsd_signal"})
# What makes pages fault on first touch: protecting them, mapping them inaccessible, or
# handing their faults to a user-space handler.
_PROTECTORS = frozenset({"mprotect", "PROT_NONE", "userfaultfd", "UFFDIO_REGISTER", "pkey_mprotect"})


class ComputesOnMemoryFault(Rule):
    """The extension handles its own memory faults: it installs a `SIGSEGV` or `SIGBUS`
    handler (`sigaction`, `signal`), and the same source protects pages (`mprotect`, a
    `PROT_NONE` mapping, `userfaultfd`). That is how an output can be computed lazily: forward
    returns pages no one may read yet, and the handler fills them on the first read.

    Why it games the benchmark: the work runs when the caller first reads the output, after
    forward has returned, outside the window a timer measures and a sampler watches. A
    benchmark that times forward alone sees a kernel that takes microseconds. No kernel needs
    its own fault handler: certain.

    A fault handler without page protection (a crash handler that prints a backtrace) is a
    warning: it computes nothing on its own, but it has no place in a submission either. The
    Python `faulthandler` module only prints tracebacks and is not flagged.
    """

    code = "GK523"
    name = "ComputesOnMemoryFault"
    category = Category.LAZY_OUTPUT
    severity = Severity.ERROR
    summary = "installs a SIGSEGV/SIGBUS handler over protected pages: an output computed on first read"
    message = ("The extension installs a `{signal}` handler ({how}){protects}: a handler that fills protected "
               "pages computes the output when it is first read, after forward returned, outside the timed window.")
    hint = ("Compute the whole output inside forward, into ordinary memory (torch::empty and your kernel), and "
            "remove the fault handler.")

    VALID = [
        Valid(snippet("""
            src = '''
            #include <torch/extension.h>
            #include <sys/mman.h>
            torch::Tensor f(torch::Tensor x) { auto y = torch::empty_like(x); fill(x, y); return y; }
            void unused() { int pages = PROT_READ | PROT_WRITE; (void)pages; }
            '''
        """)),
    ]
    INVALID = [
        Invalid(snippet("""
            src = '''
            #include <torch/extension.h>
            #include <csignal>
            #include <sys/mman.h>
            static void on_fault(int, siginfo_t* info, void*) { fill_page(info->si_addr); }
            void arm(void* p, size_t n) {
              struct sigaction sa = {}; sa.sa_sigaction = on_fault; sa.sa_flags = SA_SIGINFO;
              sigaction(SIGSEGV, &sa, nullptr);
              mprotect(p, n, PROT_NONE);
            }
            '''
        """), line=8, message="installs a `SIGSEGV` handler"),
    ]

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if "SIGSEGV" not in self.ctx.text and "SIGBUS" not in self.ctx.text:
            self.switch_off_inherited(ComputesOnMemoryFault, ("visit_Call",))  # most files: no handler to call

    def check_cpp(self, source: CppSource) -> None:
        idents = source.by_text["ident"]
        signals = sorted(_FAULTS & idents.keys())
        if not signals or not (_INSTALLERS & idents.keys()):
            return
        tokens = source.tokens
        for index in sorted(i for name in _INSTALLERS for i in idents.get(name, ())):
            if index + 1 >= len(tokens) or tokens[index + 1].text != "(":
                continue
            hit = sorted(_FAULTS & {tokens[index + 2].text} if index + 2 < len(tokens) else set())
            action = tokens[index + 4].text if index + 4 < len(tokens) else ""
            if not hit or action in ("nullptr", "NULL", "0"):
                continue  # another signal, or a query of the current action (`sigaction(SIGSEGV, nullptr, &old)`)
            protects = sorted(_PROTECTORS & idents.keys())
            severity = None if protects else Severity.WARNING
            self.report_cpp(source, tokens[index].offset, self.message.format(
                signal=hit[0], how=f"`{tokens[index].text}`",
                protects=f" and protects pages (`{protects[0]}`)" if protects else ""),
                evidence={"signal": hit[0], "protects": protects}, severity=severity)
            return

    def visit_Call(self, node: cst.Call) -> None:
        # Python: signal.signal(signal.SIGSEGV, handler)
        if self.ctx.qualname(node.func) != "signal.signal" or not node.args:
            return
        first = self.ctx.qualname(node.args[0].value) or ""
        if first.rsplit(".", 1)[-1] in _FAULTS:
            self.report(node, self.message.format(signal=first.rsplit(".", 1)[-1], how="`signal.signal`", protects=""),
                        evidence={"signal": first}, severity=Severity.WARNING)
