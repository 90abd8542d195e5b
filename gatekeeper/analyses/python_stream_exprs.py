"""What a Python expression says about CUDA streams, for GK500: the module-level streams, an
expression that is the current stream or a parameter, a name that is a reference to a stream
(not its binding or a test of it), the name a new stream is stored under, a frame that
switches to a stream. Not a rule file: it defines no rule with a `code`; nothing here reports."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from gatekeeper.analyses.stream_joins import CURRENT_STREAM, STREAM_CTORS
from gatekeeper.static.context import FileContext
from gatekeeper.static.syntax import is_self_attr, self_attr, store_key


def module_streams(ctx: FileContext) -> set[str]:
    """Module-level names bound to a new stream (`S = torch.cuda.Stream()`)."""
    return {
        name for name, values in ctx.constants.items()
        for v in values if type(v) is cst.Call and ctx.qualname(v.func) in STREAM_CTORS
    }


def is_current_stream(ctx: FileContext, expr: Optional[cst.BaseExpression]) -> bool:
    if expr is None or (type(expr) is cst.Name and expr.value == "None"):
        return True
    if type(expr) is cst.Call:
        return ctx.qualname(expr.func) in CURRENT_STREAM
    if type(expr) is cst.Name:
        binding = ctx.resolver.lookup(expr.value)
        value = binding.value if binding is not None else None
        return type(value) is cst.Call and ctx.qualname(value.func) in CURRENT_STREAM
    return False


_EXTERNAL = frozenset({"torch.cuda.ExternalStream", "torch.cuda.streams.ExternalStream", "cupy.cuda.ExternalStream"})
_HANDLES = frozenset({"cuda_stream", "ptr", "stream_id"})


def wraps_current_stream(ctx: FileContext, call: cst.Call) -> bool:
    """`cupy.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream)`: a wrapper of the
    caller's current stream (how CuPy or another library is made to launch on torch's
    stream), not a side stream."""
    if ctx.qualname(call.func) not in _EXTERNAL or not call.args:
        return False
    handle = call.args[0].value
    if type(handle) is cst.Name:  # `h = torch.cuda.current_stream().cuda_stream`
        binding = ctx.resolver.lookup(handle.value)
        handle = binding.value if binding is not None and binding.value is not None else handle
    return type(handle) is cst.Attribute and handle.attr.value in _HANDLES and \
        is_current_stream(ctx, handle.value) and handle.value is not None


def is_stream_parameter(ctx: FileContext, expr: Optional[cst.BaseExpression]) -> bool:
    """A stream that arrives as a parameter is the caller's: judged where it is created."""
    if type(expr) is not cst.Name:
        return False
    binding = ctx.resolver.lookup(expr.value)
    return binding is not None and binding.kind == "param"


_IDLE_METHODS = frozenset({"wait_stream", "wait_event", "record_event", "query", "synchronize"})
_IDLE_ATTRIBUTES = frozenset({"device", "priority", "device_index", "device_type"})


def is_stream_reference(ctx: FileContext, node: cst.CSTNode) -> bool:
    parent = ctx.parent(node)
    if type(parent) is cst.AssignTarget or type(parent) is cst.Annotation:
        return False
    if type(parent) is cst.Attribute:
        if parent.attr is node:
            return False
        # `s.wait_stream(cur)`, `s.record_event()`, `s.device`: a wait, a marker or a read of
        # the handle puts no work on `s` (a capture-only stream is made to wait before capture)
        method = parent.attr.value
        if method in _IDLE_ATTRIBUTES or (method in _IDLE_METHODS and type(call := ctx.parent(parent)) is cst.Call
                                          and call.func is parent):
            return False
    if type(parent) in (cst.Comparison, cst.ComparisonTarget, cst.If, cst.UnaryOperation):
        return False  # `if self.stream is None:`: a test of the handle launches nothing on it
    return type(parent) not in (cst.Param, cst.ImportAlias, cst.Global, cst.Nonlocal)


def stream_identity(ctx: FileContext, expr: cst.BaseExpression, local_streams: set[str], module_streams: set[str],
                    stream_attrs: set[str]) -> Optional[str]:
    """The name of a stream variable or attribute `expr` refers to (GK500): a local stream of
    the function, a module-level one not shadowed, or a `self.` attribute holding one."""
    if type(expr) is cst.Name:
        if expr.value in local_streams:
            return expr.value
        if expr.value in module_streams:
            binding = ctx.resolver.lookup(expr.value)
            if binding is None or binding is ctx.resolver.module_scope.names.get(expr.value):
                return expr.value
    elif is_self_attr(expr) and expr.attr.value in stream_attrs:
        return self_attr(expr)
    return None


def is_join(ctx: FileContext, func: cst.Attribute, receiver_is_side_stream: bool) -> bool:
    """Whether `<receiver>.<JOIN_METHOD>(...)` joins a side stream back (GK500)."""
    if func.attr.value == "synchronize":
        # the current stream synchronising itself does not wait for a side stream
        return not is_current_stream(ctx, func.value) or ctx.qualname(func.value) == "torch.cuda"
    # `side.wait_stream(current)` makes the side stream wait: the opposite of a join
    return not receiver_is_side_stream


GRAPH_CAPTURES = frozenset({"torch.cuda.graph", "torch.cuda.graphs.graph"})


def capture_stream_argument(ctx: FileContext, node: cst.CSTNode) -> bool:
    """Whether `node` is the stream a CUDA graph capture records on: `torch.cuda.graph(g,
    stream=node)` (its third positional parameter)."""
    arg = ctx.parent(node)
    if type(arg) is not cst.Arg or arg.value is not node or arg.star:
        return False
    call = ctx.parent(arg)
    if type(call) is not cst.Call or ctx.qualname(call.func) not in GRAPH_CAPTURES:
        return False
    if arg.keyword is not None:
        return arg.keyword.value == "stream"
    positional = [a for a in call.args if a.keyword is None and not a.star]
    return len(positional) > 2 and positional[2] is arg


def creation_target(ctx: FileContext, node: cst.Call) -> Optional[str]:
    parent = ctx.parent(node)
    if type(parent) is cst.Assign and len(parent.targets) == 1:
        return store_key(parent.targets[0].target)
    if type(parent) is cst.AnnAssign and type(parent.target) is cst.Name:
        return parent.target.value
    if type(parent) is cst.Element:  # `s, g = torch.cuda.Stream(), torch.cuda.CUDAGraph()`
        values, assign = ctx.parent(parent), ctx.parent(ctx.parent(parent))
        if type(values) is cst.Tuple and type(assign) is cst.Assign and len(assign.targets) == 1 \
                and type(assign.targets[0].target) is cst.Tuple:
            names = assign.targets[0].target.elements
            index = next((i for i, e in enumerate(values.elements) if e is parent), -1)
            if len(names) == len(values.elements) and 0 <= index and type(names[index]) is cst.Element:
                return store_key(names[index].value)
    return None


