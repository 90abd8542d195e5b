"""Operators the submission registers with torch from Python (`torch.library`), and the
callables registered as their bodies. Not a rule file.

`torch.ops.<ns>.<op>(x)` of a namespace the file itself defines in Python runs the body the
file registered (`Library.impl("op", body, key)`, `@torch.library.custom_op("ns::op")`,
`torch.library.impl`, `register_kernel`, `triton_op`): that call is a call of the body, not
an own kernel by itself (red team round 12: the body was `partial(torch.Tensor.mean, dim=0)`).
The body's own code (a Triton launch, an extension call) is the kernel, where it is.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from gatekeeper.static.names import string_value

# calls whose first argument names the namespace ("ns") or the op ("ns::op")
_NAMESPACE_MAKERS = frozenset({"torch.library.Library"})
_OP_NAMERS = frozenset({
    "torch.library.custom_op", "torch.library.define", "torch.library.impl", "torch.library.register_kernel",
    "torch.library.triton_op", "torch._custom_ops.custom_op", "torch._custom_ops.impl", "torch._library.custom_ops.custom_op",
})
# decorators (called with the op's name) whose function is the op's body on real tensors;
# `register_fake` / `impl_abstract` bodies run only on fake tensors and are no body here
BODY_DECORATORS = frozenset({
    "torch.library.custom_op", "torch.library.impl", "torch.library.register_kernel", "torch.library.triton_op",
    "torch._custom_ops.custom_op", "torch._custom_ops.impl", "torch._library.custom_ops.custom_op",
})
_OP_BODIES = "_gk_op_bodies"
_NAMESPACES = "_gk_py_op_namespaces"


def registered_namespace(qual: Optional[str], call: cst.Call) -> Optional[str]:
    """The op namespace a registration call defines or fills, or None."""
    if qual not in _NAMESPACE_MAKERS and qual not in _OP_NAMERS or not call.args:
        return None
    name = string_value(call.args[0].value) or ""
    if qual in _NAMESPACE_MAKERS:
        return name if name.isidentifier() else None
    ns = name.split("::", 1)[0] if "::" in name else ""
    return ns if ns.isidentifier() else None


def note_namespace(holder: object, ns: str) -> None:
    holder.__dict__.setdefault(_NAMESPACES, set()).add(ns)


def py_namespaces(holder: object) -> set[str]:
    return holder.__dict__.get(_NAMESPACES, set())


def note_body(holder: object, function_key: str) -> None:
    """A function registered as an op body runs whenever the op is called: a forward root."""
    holder.__dict__.setdefault(_OP_BODIES, set()).add(function_key)


def op_bodies(holder: object) -> set[str]:
    return holder.__dict__.get(_OP_BODIES, set())


def is_body_decorator(qual: Optional[str]) -> bool:
    return qual in BODY_DECORATORS


def without_own_op_calls(ctx, kernels: list) -> list:
    """Drop `torch.ops.<ns>.<op>` launches of a namespace the file registers from Python (and no
    C++ `TORCH_LIBRARY` of the same name defines): the call runs the registered body, whose own
    launches are the kernel where they are; the op call is none by itself."""
    namespaces = {ns for ns in py_namespaces(ctx)
                  if not any(f"TORCH_LIBRARY({ns}" in s.text or f"TORCH_LIBRARY_IMPL({ns}" in s.text
                             for s in ctx.cpp_sources)}
    if not namespaces:
        return kernels
    return [k for k in kernels if not any(k.what.startswith(f"torch.ops.{ns}.") for ns in namespaces)]
