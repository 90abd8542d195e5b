"""GK311's Python side: a Python `if` that asks an extension function about the process (its C++
body makes a process read, cpp_process_state) and runs the extension's own computation on one
side and something else on the other: torch, numpy or SciPy, or an extension function that
reaches a vendor library (red team round 5: the `if` moved to Python).

One side computes on its own when it calls an extension function whose C++ body has a loop or a
kernel launch and no library call. The other side is the library when it returns a computed
value (a call) without any such call: nothing else can produce the result there. A side that
raises, or returns nothing computed, chooses nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Optional

import libcst as cst

from gatekeeper.static.context import FileContext
from gatekeeper.static.walk import subtree


@dataclass
class ExtensionFacts:
    """Over every C++ source of the file: function name -> the process read behind it, and the
    functions that compute on their own (and reach no library)."""

    reads: dict[str, str] = field(default_factory=dict)
    own: set[str] = field(default_factory=set)


def _extension_calls(node: cst.CSTNode) -> Iterable[str]:
    for sub in subtree(node, into_functions=False):
        if type(sub) is cst.Call and type(sub.func) is cst.Attribute:
            yield sub.func.attr.value


def _read_in_test(ctx: FileContext, test: cst.BaseExpression, facts: ExtensionFacts) -> Optional[str]:
    """The process read a condition asks an extension about: `_ext.sandboxed()`, or a module
    constant bound to such a call (`_CHECKED = _ext.sandboxed()`)."""
    for name in _extension_calls(test):
        if name in facts.reads:
            return f"{name}() ({facts.reads[name]})"
    for sub in subtree(test, into_functions=False):
        if type(sub) is cst.Name:
            for value in ctx.constants.get(sub.value, []):
                for name in _extension_calls(value):
                    if name in facts.reads:
                        return f"{sub.value} = {name}() ({facts.reads[name]})"
    return None


def _returns_computed(nodes: list[cst.CSTNode]) -> bool:
    return any(type(sub) is cst.Return and type(sub.value) is cst.Call
               for node in nodes for sub in subtree(node, into_functions=False))


def _side_nodes(ctx: FileContext, node: cst.If) -> tuple[list[cst.CSTNode], list[cst.CSTNode]]:
    """The two sides: the body, and the `else` (an `elif` is its own `if`); a body that returns
    leaves the statements after the `if` to the other side."""
    body: list[cst.CSTNode] = [node.body]
    other: list[cst.CSTNode] = [node.orelse] if node.orelse is not None else []
    if any(type(sub) is cst.Return for sub in subtree(node.body, into_functions=False)):
        parent = ctx.parent(node)
        block = getattr(parent, "body", None)
        if isinstance(block, (list, tuple)) and node in block:
            other += list(block[block.index(node) + 1:])
    return body, other


def python_choices(ctx: FileContext, ifs: list[cst.If], facts: ExtensionFacts) -> list[tuple[cst.If, str]]:
    """(the `if`, the process read) for each Python branch that chooses the library over the
    extension's own computation on what an extension function reads of the process."""
    out: list[tuple[cst.If, str]] = []
    if not facts.reads:
        return out
    for node in ifs:
        read = _read_in_test(ctx, node.test, facts)
        if read is None:
            continue
        sides = _side_nodes(ctx, node)
        owns = [any(name in facts.own for n in side for name in _extension_calls(n)) for side in sides]
        for k in (0, 1):
            if owns[k] and not owns[1 - k] and _returns_computed(sides[1 - k]):
                out.append((node, read))
                break
    return out


# Python reads of the process (not the machine: `os.cpu_count()` is the machine's and the same
# in both processes; the affinity mask, the thread pool and the pid are not).
PY_PROCESS_READS = frozenset({
    "torch.get_num_threads", "torch.get_num_interop_threads", "os.sched_getaffinity", "os.getpid", "os.getppid",
    "os.getuid", "os.geteuid", "os.getgid", "os.getenv", "os.environ.get", "sys._getframe", "resource.getrusage",
    "time.process_time", "threading.active_count", "os.getcwd", "os.isatty", "sys.stdin.isatty",
    "inspect.stack", "inspect.currentframe",
})
# The words that make a file worth the search (PY_PROCESS_READS's, less the environment and the
# working folder: most files set build variables or find their sources with those, and the
# environment read in Python is GK310's and GK444's).
PY_PROCESS_WORDS = ("get_num_threads", "get_num_interop_threads", "sched_getaffinity", "getpid", "getppid", "getuid",
                    "geteuid", "getgid", "_getframe", "getrusage", "process_time", "active_count", "isatty",
                    "currentframe", "inspect.stack")


def _python_read(ctx: FileContext, expr: cst.BaseExpression) -> Optional[str]:
    for sub in subtree(expr, into_functions=False):
        if type(sub) is cst.Call:
            qual = ctx.qualname(sub.func) or ""
            if qual in PY_PROCESS_READS:
                return f"{qual}()"
        elif type(sub) is cst.Name and sub.value in ctx.constants:
            for value in ctx.constants[sub.value]:
                found = _python_read(ctx, value) if value is not expr else None
                if found:
                    return found
    return None


def handed_choices(ctx: FileContext, decided: dict[str, dict[int, str]]) -> list[tuple[cst.Call, str, str]]:
    """(the call, the process read, the C++ choice) where Python hands the process's state to a
    parameter of an extension function that chooses the library on it (`_ext.gemm(a, b,
    torch.get_num_threads())`, with `if (workers > 1) sgemm_(...)` in C++)."""
    out: list[tuple[cst.Call, str, str]] = []
    if not decided or not any(word in ctx.text for word in PY_PROCESS_WORDS):
        return out
    for node in subtree(ctx.module):
        if type(node) is not cst.Call or type(node.func) is not cst.Attribute or node.func.attr.value not in decided:
            continue
        params = decided[node.func.attr.value]
        for index, arg in enumerate(node.args):
            if arg.keyword is None and not arg.star and index in params:
                read = _python_read(ctx, arg.value)
                if read is not None:
                    out.append((node, read, params[index]))
                    break
    return out
