"""What each call of a `self.X` attribute recorded during the traversal is, decided by
TorchUsage.resolve() once the file is read: an own kernel (a callable of the file that
launches one, `self.op = _ext.fused_cuda`, a callable passed in to a file that builds its own
kernels), torch compute (a class attribute aliasing a torch function, an nn layer), or a
callable fetched at run time (`opaque_calls`). Not a rule file: it defines no rule with a
`code`.
"""

from __future__ import annotations

from gatekeeper.analyses.own_callables import fetched_at_run_time
from gatekeeper.analyses.torch_op_table import short_op
from gatekeeper.analyses.torch_usage_model import Kernel, Use, extension_module


def resolve_self_calls(usage) -> None:  # usage: TorchUsage (imports this module)
    """Adds the kernels, uses and opaque calls that the `self.X(...)` calls make."""
    for attr, node, key, _ in usage.self_calls:
        if attr not in usage.self_ext and attr not in usage.self_passed and attr not in usage.class_attrs \
                and attr not in usage.self_layers:
            # self._fast = lambda t: run(t); self._fn = _mod().f: followed through the bindings
            own = usage.own_callables()
            if own.call_is_own(node):
                usage.kernels.append(Kernel(f"self.{attr}", key, (), node))
            elif usage.in_forward(key) and fetched_at_run_time(own, node):
                usage.opaque_calls.append(f"self.{attr}")
            continue
        if attr in usage.self_ext and attr not in usage.self_layers and attr not in usage.class_attrs:
            receiver, name, qual = usage.self_ext[attr]
            if qual is not None and extension_module(qual):
                usage.kernels.append(Kernel(f"self.{attr}", key, (), node))
            elif qual is None or not qual.startswith("torch."):
                usage.kernels.append(Kernel(f"self.{attr}", key, (), node, needs_ext=(receiver, name)))
            continue
        if attr in usage.self_passed and attr not in usage.self_layers and attr not in usage.class_attrs \
                and usage.has_cuda_kernel and (usage.holders or usage.loader_functions):
            # `Block(fused_op=self.ext.fused_cuda)` then `self.fused_op(out, ...)`: in a file
            # that builds its own kernels, a callable passed in may be one of them
            usage.kernels.append(Kernel(f"self.{attr}", key, (), node))
            continue
        if attr not in usage.class_attrs and attr not in usage.self_layers:
            continue
        path = usage._path(node)
        alias = usage.class_attrs.get(attr, "")
        plain = not any(part[:1].isupper() for part in alias.split("."))
        if alias.startswith("torch.") and plain and usage.ops.function_is_compute(alias):
            usage.uses.append(Use("function", short_op(alias.rsplit(".", 1)[-1]), alias,
                                  usage.ops.is_heavy(alias.rsplit(".", 1)[-1], alias), key, node, path))
            continue
        classes = usage.self_layers.get(attr)
        if classes:
            compute = [c for c in classes if usage._nn_compute_class(c)]
            if compute:
                heavy = [c for c in compute if usage.ops.is_heavy(c.rsplit(".", 1)[-1])]
                main = (heavy or compute)[0]
                usage.uses.append(Use("layer", short_op(main.rsplit(".", 1)[-1]), main, bool(heavy), key, node, path,
                                      more_layers=len(compute) - 1))
