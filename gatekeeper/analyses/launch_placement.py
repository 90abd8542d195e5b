"""Which recorded launches are the submission's own kernel doing work on the forward path.
Not a rule file; TorchUsage.resolve() calls `place_kernels` once the traversal is over.

A launch recorded during the traversal is kept when it is one: a kernel-decorated function
of the file, a function of an extension or native library it builds (held by a name,
`self.X`, a getter's result), or any callable own_callables.py follows to one. Then only
those on the forward path count, minus launches that do no work on the data:
- inside a stored lambda (`self._fast = lambda t: run(t)`): the call of the lambda is the
  launch; a lambda never called never runs;
- on a constant sliver only (`x[:1]`, kernel_work.py);
- whose output never reaches the result (a build-time self-test, a warm-up;
  torch_result_flow.py).
Calls of a callable fetched at run time that may be an own kernel are noted
(`opaque_calls`): they make "no kernel of its own" likely rather than certain.
"""

from __future__ import annotations

import libcst as cst

from gatekeeper.analyses.kernel_work import helper_launches, is_token_launch
from gatekeeper.analyses.own_callables import fetched_at_run_time
from gatekeeper.analyses.torch_result_flow import outside_result
from gatekeeper.analyses.torch_usage_model import Kernel, receiver_key


def place_kernels(usage, holders: set[str]) -> None:  # usage: TorchUsage (imports this module)
    ext_ok = usage.has_cuda_kernel or usage.has_own_loops or not usage.cpp_seen
    kept: list[Kernel] = []
    for k in usage.kernels:
        if k.needs_def is not None:
            if k.needs_def in usage.kernel_defs:
                kept.append(k)
            elif type(k.node) is cst.Call and type(k.node.func) is cst.Name:
                own = usage.own_callables()  # run = _mod().f; _max = _ext.max; a closure over them
                if own.call_is_own(k.node):
                    kept.append(k)
                elif usage.in_forward(k.function) and fetched_at_run_time(own, k.node):
                    usage.opaque_calls.append(k.needs_def)
        elif k.needs_ext is not None:
            key, attr = k.needs_ext
            if (key in holders or key.removeprefix("call:") in usage.loader_functions or attr in usage.ext_functions) \
                    and ext_ok:
                kept.append(k)
            elif ext_ok and type(k.node) is cst.Call and usage.own_callables().call_is_own(k.node):
                kept.append(k)  # _lib().f(...) with _lib() returning a ctypes.CDLL
        else:
            kept.append(k)
    forward = [k for k in kept if usage.in_forward(k.function)]
    forward += helper_launches(usage, forward, [k for k in usage.kernels if k not in kept])
    for k in forward:  # parents are complete now; only the kept ones need a path
        k.path = usage._path(k.node)
    forward = [k for k in forward if not _stored_lambda(k.path)]
    usage.token_kernels = [k for k in forward if is_token_launch(usage, k)]
    forward = [k for k in forward if not any(k is t for t in usage.token_kernels)]
    usage.idle_kernels = [k for k in forward if outside_result(k.path, lambda c: pure_call(usage, c),
                                                               lambda e: library_constant(usage, e))]
    usage.kernels = [k for k in forward if not any(k is t for t in usage.idle_kernels)]


def pure_call(usage, call: cst.Call) -> bool:
    """A call that writes none of its arguments: a torch op or a tensor compute method
    (in-place `_` forms and `out=` are handled by the caller), a Python builtin."""
    func = call.func
    qual = usage.ctx.qualname(func)
    if qual is not None:
        namespace = usage.ops.torch_op_namespace(qual)
        return qual.startswith(("torch.", "builtins.", "math.")) and (
            namespace is None or namespace[0] in usage.ops.op_namespaces)
    if type(func) is not cst.Attribute or not usage.ops.method_is_compute(func.attr.value):
        return False
    key = receiver_key(func.value)  # `_ext.add(x, y, out)` is the extension's, not Tensor.add
    return key is None or (key not in usage.holders and key.removeprefix("call:") not in usage.loader_functions)


def library_constant(usage, expr: cst.BaseExpression) -> bool:  # usage: TorchUsage
    """An attribute of torch, numpy, Triton or math (`torch.bfloat16`, `tl.float16`, `np.float32`):
    a constant of the library, not an object a call could write for the caller."""
    if type(expr) is not cst.Attribute:
        return False
    qual = usage.ctx.qualname(expr)
    return qual is not None and qual.startswith(("torch.", "numpy.", "triton.", "math."))


def _stored_lambda(path: tuple[cst.CSTNode, ...]) -> bool:
    """The innermost lambda around a launch is the value of an assignment."""
    for index, node in enumerate(path):
        if type(node) is cst.Lambda:
            parent = path[index + 1] if index + 1 < len(path) else None
            return type(parent) in (cst.Assign, cst.AnnAssign)
    return False


__all__ = ["library_constant", "place_kernels", "pure_call"]
