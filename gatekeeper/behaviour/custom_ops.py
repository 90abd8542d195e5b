"""A custom operator's body under the recorder (gatekeeper/behaviour/attribution.py).

An operator outside torch's namespaces is the submission's own (`torch.library`,
`@custom_op`, `TORCH_LIBRARY`). Its kernel used to run while the recording mode was popped,
so a body that let torch compute (`operator.add` on tensors) was never seen. Here the kernel
runs with the mode pushed again, and whether a Python function ran as its body is noted:
a Python body is interpreted, like forward, and only what it dispatches is work."""

from __future__ import annotations

import os
import sys
from typing import Any


def run_custom(recorder: Any, func: Any, args: tuple, kwargs: dict, hook: Any) -> tuple[Any, bool, float]:
    """Run a custom operator's kernel with the recording mode pushed again, so the operators
    its body dispatches are recorded (as inside the submission's code) instead of running
    while the mode is popped. The kernel is reached by redispatching below the Python key.
    Returns (output, whether a Python function ran as its body, seconds spent in the
    handlers of the operators it dispatched)."""
    import torch

    keys = None
    for value in _leaves((args, kwargs)):
        if isinstance(value, torch.Tensor):
            found = torch._C._dispatch_keys(value)
            keys = found if keys is None else keys | found
    if keys is None or recorder._mode is None or len(recorder._custom) >= _MAX_DEPTH or _made_by_custom_op(func):
        # No tensor argument: nothing to redispatch on. An operator made by
        # `@torch.library.custom_op` keeps its own Python-key handling (per-mode rules), which a
        # redispatch below that key would bypass; it is called as before, and the static rules
        # see its body (a decorated function of the file).
        return func(*args, **kwargs), False, 0.0
    keys = keys & torch._C._dispatch_keyset_full_after(torch._C.DispatchKey.Python)
    global _INFRA
    _INFRA = _INFRA or _infra()
    python_body = [False]

    def watch(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            if not frame.f_code.co_filename.startswith(_INFRA):  # torch's mode plumbing is not a body
                python_body[0] = True  # the kernel is a Python function (or calls one)
        elif hook is not None:
            hook(frame, event, arg)

    redispatch = func._handle.redispatch_boxed  # a C method: no Python frame of its own
    recorder._custom.append(0.0)
    try:
        with recorder._mode:
            sys.setprofile(watch)
            try:
                out = redispatch(keys, *args, **kwargs)
            finally:
                sys.setprofile(None)
    finally:
        inner = recorder._custom.pop()
    return out, python_body[0], inner


def _infra() -> tuple[str, ...]:
    import torch

    # torch's own code and gatekeeper's (the recorder's handlers run inside the body)
    return (os.path.dirname(os.path.abspath(torch.__file__)) + os.sep,
            os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep)


_INFRA: tuple[str, ...] = ()


def _leaves(value: Any) -> list[Any]:
    from torch.utils._pytree import tree_leaves

    return tree_leaves(value)


_MAX_DEPTH = 8  # custom operators inside custom operators: deeper ones run as plain calls


def _made_by_custom_op(func: Any) -> bool:
    """Whether the operator was defined with `@torch.library.custom_op` (its registry entry)."""
    try:
        from torch._library.custom_ops import OPDEFS

        return str(func.name()).split(".", 1)[0] in OPDEFS
    except Exception:
        return False
