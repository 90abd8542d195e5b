from __future__ import annotations

from gatekeeper.analyses.torch_rule_base import TorchFallbackRule
from gatekeeper.static.examples import Invalid, Valid, snippet


class CallsTorchLayer(TorchFallbackRule):
    """The forward path calls a torch.nn compute layer: `self.fc = nn.Linear(...)` in
    `__init__` and `self.fc(x)` (or `self.fc.forward(x)`) in forward; an `nn.Sequential`
    or `nn.ModuleList` of torch layers (`self.net(x)`, `self.layers[i](x)`,
    `for layer in self.layers: x = layer(x)`); a module-level `act = nn.GELU()` called in
    forward; or `nn.Linear(a, b)(x)` inline.

    Why it games the benchmark: the layer's forward is torch's kernel, so the work being
    timed is torch's, not the submission's.

    Under the default profile a cuDNN convolution or a cuBLAS `nn.Linear` next to the
    submission's own fused kernel is what KernelBench accepts: a warning (suspect, confirmed
    by the run-time work attribution GK667). It rejects when no own kernel does real work on
    the forward path, when the problem forbids the layer, or when torch's layers compute
    every op of the reference; strict rejects every layer call (policy table below).

    Known false-positive patterns and why it does not fire on them: holding an nn layer only
    for its parameters (`_ext.linear(x, self.fc.weight, self.fc.bias)`); containers and
    `nn.Identity`, `nn.Flatten`, which compute nothing; a submodule class of the
    submission's own (`self.block = Block()`); a self attribute bound to an extension
    function (`self.op = _ext.fused`), which is the submission's kernel; layers called only
    in `__init__`. Allow layers with `[rules.GK302.options] allow = ["torch.nn.ReLU"]`.
    """

    code = "GK302"
    name = "CallsTorchLayer"
    summary = "forward runs a torch.nn layer instead of the submission's kernel"
    kinds = ("layer",)
    message = "forward path runs the torch layer `{what}`{more}, so torch computes `{op}`, not the submission's kernel: {why}."
    hint = (
        "Keep the layer only as a holder of weights and compute with your own kernel, e.g. "
        "`_ext.linear(x, self.fc.weight, self.fc.bias)`, or store the weights as `nn.Parameter`s. "
        "If the problem allows this layer, add it to the `allow` option of GK302 in gatekeeper.toml (rules.GK302.options)."
    )
    VALID = [
        # the layer only holds the weights; the kernel computes
        Valid(snippet("""
            import torch.nn as nn
            class ModelNew(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc = nn.Linear(64, 64)
                    nn.init.zeros_(self.fc.bias)
                def forward(self, x):
                    return _ext.linear(x, self.fc.weight, self.fc.bias)
        """)),
        # a submodule of the submission's own class
        Valid(snippet("""
            import torch.nn as nn
            class Block(nn.Module):
                def forward(self, x):
                    return _ext.f(x)
            class ModelNew(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.block = Block()
                    self.flat = nn.Flatten()
                def forward(self, x):
                    return self.flat(self.block(x))
        """)),
    ]
    INVALID = [
        Invalid(snippet("""
            import torch.nn as nn
            class ModelNew(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc = nn.Linear(64, 64)
                def forward(self, x):
                    return self.fc(x)
        """), line=7, message="forward path runs the torch layer `torch.nn.Linear`"),
        # forward defined before __init__, layer in a Sequential
        Invalid(snippet("""
            from torch import nn
            class ModelNew(nn.Module):
                def forward(self, x):
                    return self.net(x)
                def __init__(self):
                    super().__init__()
                    self.net = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU())
        """), line=4, message="forward path runs the torch layer `torch.nn.Conv2d` (and 1 more torch.nn layer), so"),
        # ModuleList iterated in forward
        Invalid(snippet("""
            import torch.nn as nn
            class ModelNew(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.layers = nn.ModuleList([nn.LayerNorm(8) for _ in range(2)])
                def forward(self, x):
                    for layer in self.layers:
                        x = layer(x)
                    return x
        """), line=8, message="forward path runs the torch layer `torch.nn.LayerNorm`"),
        # module-level layer object
        Invalid(snippet("""
            import torch.nn as nn
            act = nn.GELU()
            class ModelNew(nn.Module):
                def forward(self, x):
                    return act(x)
        """), line=5, message="forward path runs the torch layer `torch.nn.GELU`"),
    ]
