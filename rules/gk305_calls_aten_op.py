from __future__ import annotations

from gatekeeper.analyses.torch_rule_base import TorchFallbackRule
from gatekeeper.static.examples import Invalid, Valid, snippet


class CallsAtenOp(TorchFallbackRule):
    """The forward path calls a torch-owned operator through the dispatcher:
    `torch.ops.aten.mm(a, b)`, `torch.ops.aten.mean.dim(x, [0])`, `aten = torch.ops.aten;
    aten.sum(...)`, `torch.ops.prims.*`, `torch.ops.quantized.*`.

    Why it games the benchmark: these are torch's own kernels reached by a side door that a
    checker looking for `torch.mean` misses.

    `torch.ops.<namespace>.*` for any namespace not owned by torch (rules/torch_ops.toml,
    `torch_op_namespaces`) is the submission's own registered op and counts as its kernel.
    Known false-positive patterns and why it does not fire on them: the submission's own
    registered ops (`torch.ops.mylib.fused(x)`), because only torch-owned namespaces count;
    `torch.ops.load_library`. Severity follows the torch-fallback policy (see GK301 and the
    table below); allow with `[rules.GK305.options] allow = ["torch.ops.aten.relu*"]`.
    """

    code = "GK305"
    name = "CallsAtenOp"
    summary = "forward calls torch.ops.aten (torch's own kernels through the dispatcher)"
    kinds = ("aten",)
    message = "forward path calls `{what}`, torch's own `{op}` kernel through the dispatcher, not the submission's kernel: {why}."
    hint = (
        "Register and call your own op instead (`torch.library` with your namespace, then "
        "`torch.ops.mylib.my_op(...)`), or call your extension function directly. "
        "If the problem allows this op, add it to the `allow` option of GK305 in gatekeeper.toml (rules.GK305.options)."
    )
    VALID = [
        Valid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    return torch.ops.mylib.fast_mean(x)
        """)),
    ]
    INVALID = [
        Invalid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, a, b):
                    return torch.ops.aten.mm(a, b)
        """), line=4, message="forward path calls `torch.ops.aten.mm`"),
        Invalid(snippet("""
            import torch
            aten = torch.ops.aten
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    return aten.mean.dim(x, [0])
        """), line=5, message="forward path calls `torch.ops.aten.mean.dim`"),
    ]
