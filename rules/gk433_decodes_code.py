from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from gatekeeper.report import Category, Severity
from gatekeeper.analyses.harness_support import literal, matches, resolve
from gatekeeper.static.syntax import argument
from gatekeeper.static.rule import Rule
from gatekeeper.static.walk import children
from gatekeeper.static.examples import Invalid, Valid, snippet

DECODERS = (
    "base64", "binascii.a2b_base64", "binascii.unhexlify", "binascii.a2b_hex", "zlib.decompress",
    "gzip.decompress", "bz2.decompress", "lzma.decompress", "codecs.decode", "builtins.bytes.fromhex",
    "marshal.loads", "marshal.load", "pickle.loads", "_pickle.loads", "dill.loads", "cloudpickle.loads",
)
# Deserialisers that build code or run it while loading (pickle's __reduce__).
ALWAYS = ("marshal", "pickle.loads", "_pickle.loads", "dill", "cloudpickle")
SINKS = (
    "builtins.exec", "builtins.eval", "builtins.compile", "builtins.__import__", "importlib",
    "types.FunctionType", "types.CodeType", "types.LambdaType", "marshal.loads", "pickle.loads",
    "torch.utils.cpp_extension.load_inline", "torch.utils.cpp_extension.load", "runpy",
    "builtins.getattr", "builtins.setattr", "operator.attrgetter",
)


@dataclass
class _Decode:
    node: cst.Call
    name: str
    targets: set[str] = field(default_factory=set)


def _walk(node: cst.CSTNode):
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(children(current))


def _names(node: cst.CSTNode) -> set[str]:
    return {n.value for n in _walk(node) if type(n) is cst.Name}


_CODECS = frozenset({"rot13", "rot_13", "base64", "base_64", "base64_codec", "zlib", "zip", "zlib_codec",
                     "hex", "hex_codec", "bz2", "bz2_codec", "uu", "uu_codec", "quopri", "quopri_codec"})


def _code_codec(ctx, call: cst.Call) -> bool:
    """codecs.decode with a codec that hides data (rot13, base64, zlib, hex...) or a computed one."""
    name = literal(ctx, argument(call, 1, "encoding"))
    if argument(call, 1, "encoding") is None:
        return False  # the default is utf-8
    return name is None or name.lower().replace("-", "_") in _CODECS


class DecodesCode(Rule):
    """Decodes hidden code: `marshal.loads`, `pickle.loads` (always), and base64 / zlib /
    gzip / bz2 / lzma / `codecs.decode` (rot13, hex) / `bytes.fromhex` whose result reaches
    `exec`, `eval`, `compile`, `__import__`, `importlib`, `getattr` / `setattr`, `types.FunctionType` /
    `CodeType`, or `load_inline`, directly or through variables.

    Why it games the benchmark: the code that runs (a patch of the timer, a CUDA source
    that hardcodes shapes) is stored encoded, so no rule can read it; pickle runs code
    while loading.

    Not flagged: `bytes.decode("utf-8")` (text, not code). A base64 or zlib decode whose result reaches none of those is a warning: it is still an
    opaque blob (an embedded cubin hides the kernel from review), but it may be data.
    """

    code = "GK433"
    name = "DecodesCode"
    category = Category.DYNAMIC_CODE
    severity = Severity.ERROR
    summary = "decodes code from base64, zlib, marshal or pickle"
    message = "`{name}` decodes {what}, so the code that runs is not readable in the submission."
    hint = (
        "Put the code in the submission as plain text: Python as Python, CUDA/C++ as a string "
        "literal passed to `load_inline`. Nothing may be encoded, compressed or pickled."
    )
    VALID = [
        Valid(snippet("""
            import torch
            x = b'abc'.decode('utf-8')
        """)),
        Valid("doc = 'we do not use base64.b64decode or marshal.loads'\n"),
    ]
    INVALID = [
        Invalid(snippet("""
            import base64
            exec(base64.b64decode('cHJpbnQoMSk='))
        """), line=2, message="`base64.b64decode` decodes data that is then executed"),
        Invalid(snippet("""
            import zlib, base64 as b
            blob = b.b64decode(DATA)
            src = zlib.decompress(blob).decode()
            code = compile(src, 'x', 'exec')
        """), line=2, message="`base64.b64decode` decodes data that is then executed"),
        Invalid(snippet("""
            import marshal, types
            fn = types.FunctionType(marshal.loads(BLOB), globals())
        """), line=2, message="`marshal.loads` decodes a serialised object"),
        Invalid(snippet("""
            import pickle
            state = pickle.loads(PAYLOAD)
        """), line=2, message="`pickle.loads` decodes a serialised object"),
        Invalid(snippet("""
            import codecs
            from torch.utils.cpp_extension import load_inline
            src = codecs.decode(ROT, 'rot13')
            ext = load_inline('k', cpp_sources=src)
        """), line=3, message="`codecs.decode` decodes data that is then executed"),
    ]

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.decodes: list[_Decode] = []
        self.sinks: list[cst.Call] = []
        self.assigns: list[cst.Assign] = []

    def visit_Call(self, node: cst.Call) -> None:
        func = resolve(self.ctx, node.func)
        if func is None:
            return
        decoder = matches(func, DECODERS)
        if decoder == "codecs.decode" and not _code_codec(self.ctx, node):
            decoder = None  # codecs.decode(b, "utf-8") is text, not hidden code
        if decoder is not None:
            self.decodes.append(_Decode(node, func, self._assigned_to(node)))
        if matches(func, SINKS):
            self.sinks.append(node)

    def visit_Assign(self, node: cst.Assign) -> None:
        self.assigns.append(node)  # data flow is worked out in finish(), only if something decodes

    def _assigned_to(self, node: cst.Call) -> set[str]:
        for parent in self.ctx.ancestors(node):
            if type(parent) is cst.Assign:
                return {t.target.value for t in parent.targets if type(t.target) is cst.Name}
            if isinstance(parent, (cst.BaseSmallStatement, cst.BaseCompoundStatement)):
                break
        return set()

    def _flow(self) -> None:
        self.sink_names: set[str] = set()
        self.sink_nodes: set[int] = set()
        for sink in self.sinks:
            for arg in sink.args:
                for node in _walk(arg.value):
                    self.sink_nodes.add(id(node))
                    if type(node) is cst.Name:
                        self.sink_names.add(node.value)
        self.flows: dict[str, set[str]] = {}
        for assign in self.assigns:
            used = _names(assign.value)
            for target in assign.targets:
                if type(target.target) is cst.Name:
                    self.flows.setdefault(target.target.value, set()).update(used)

    def _reaches_sink(self, decode: _Decode) -> bool:
        if id(decode.node) in self.sink_nodes:
            return True
        tainted = set(decode.targets)
        changed = True
        while changed:
            changed = False
            for name, used in self.flows.items():
                if name not in tainted and used & tainted:
                    tainted.add(name)
                    changed = True
        return bool(tainted & self.sink_names)

    def finish(self) -> None:
        if self.decodes:
            self._flow()
        for decode in self.decodes:
            if matches(decode.name, ALWAYS):
                self.report(decode.node, self.message.format(
                    name=decode.name, what="a serialised object, which can carry and run code"))
            elif self._reaches_sink(decode):
                self.report(decode.node, self.message.format(
                    name=decode.name, what="data that is then executed, imported or compiled"))
            else:
                self.report(decode.node, self.message.format(name=decode.name, what="an opaque blob")
                            + " It does not reach exec/compile/load_inline here, so this is a warning.",
                            severity=Severity.WARNING)
