"""Reads of the process's state in Python, for GK542. Not a rule file.

A *process read* is a value that can differ between two processes running the same inputs on
the same machine (a checker's and a benchmark's), or between two calls of one process: the
interpreter and OS (`sys.*`, `os.*`, `gc.*`, `threading.*`, `resource.*`, `time.*`,
`inspect.*`, `traceback.*`, `psutil.*`: pid, refcounts, environment, threads, rusage, the
callers' frames), torch's global modes and counters asked with no tensor (`torch.is_grad_enabled()`,
`torch.cuda.memory_allocated()`, `torch.initial_seed()`, `torch.get_num_threads()`,
`torch.are_deterministic_algorithms_enabled()`, `torch.cuda.current_stream()`...), and the
caller's mode as a tensor carries it (`x.requires_grad`, `x.is_inference()`).

Not process reads: the machine (`torch.cuda.get_device_capability()`, `is_available()`,
device properties and counts, `torch.version`, `platform`), the caller's explicit precision
request (`torch.is_autocast_enabled()`), the default dtype, and anything about the inputs'
shapes, dtypes, devices or values.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from gatekeeper.static.context import FileContext
from gatekeeper.static.walk import subtree

_MODULES = ("sys.", "os.", "gc.", "threading.", "resource.", "time.", "inspect.", "traceback.", "psutil.",
            "multiprocessing.", "getpass.", "socket.")
_TORCH_PREFIXES = ("torch.is_", "torch.get_", "torch.are_", "torch.initial_seed", "torch.seed", "torch.cuda.memory",
                   "torch.cuda.max_memory", "torch.cuda.mem_get_info", "torch.cuda.current_stream",
                   "torch.cuda.default_stream", "torch.cuda.is_current_stream_capturing",
                   "torch.cuda.graphs.is_current_stream_capturing", "torch.cuda.initial_seed", "torch.cuda.get_rng_state",
                   "torch.cuda.utilization", "torch.cuda.temperature", "torch.cuda.power_draw", "torch.cuda.clock_rate",
                   "torch._C.", "torch.autograd.", "torch.profiler.", "torch.compiler.is_", "torch._dynamo.is_",
                   "torch.jit.is_")
_MACHINE = frozenset({
    "torch.cuda.is_available", "torch.cuda.get_device_capability", "torch.cuda.get_device_name",
    "torch.cuda.get_device_properties", "torch.cuda.device_count", "torch.cuda.is_bf16_supported",
    "torch.cuda.get_arch_list", "torch.is_autocast_enabled", "torch.get_autocast_gpu_dtype",
    "torch.get_autocast_dtype", "torch.is_autocast_cpu_enabled", "torch.get_default_dtype", "torch.get_default_device",
    "torch.is_tensor", "torch.is_floating_point", "torch.is_complex", "torch.is_storage", "torch.is_nonzero",
    "torch.is_same_size", "torch.is_signed", "torch.is_conj", "torch.is_neg", "torch.is_inference",
    "os.path.join", "os.path.dirname", "os.path.abspath", "os.path.basename", "os.cpu_count", "os.sep",
    "sys.platform", "sys.version_info", "sys.version", "sys.maxsize", "sys.byteorder", "time.perf_counter_ns",
})
_TENSOR_MODES = frozenset({"requires_grad", "is_inference", "grad_fn", "is_leaf"})


def process_read(ctx: FileContext, test: cst.BaseExpression, depth: int = 0) -> Optional[str]:
    """The first process read in a condition, as written, or None. Follows a local or module
    constant bound to a read (`_PID = os.getpid()`; `mode = torch.is_grad_enabled()`)."""
    nodes = list(subtree(test, into_functions=False))
    names = [node for node in nodes if type(node) is cst.Name]  # after the direct reads
    for node in [n for n in nodes if type(n) is not cst.Name] + names:
        kind = type(node)
        if kind is cst.Call or kind is cst.Attribute:
            target = node.func if kind is cst.Call else node  # type: ignore[attr-defined]
            qual = ctx.qualname(target) or ""
            if qual and qual not in _MACHINE and not qual.startswith("os.path.") and (
                    qual.startswith(_MODULES) or (qual.startswith(_TORCH_PREFIXES)
                                                  and (kind is cst.Attribute or not node.args))):  # type: ignore[attr-defined]
                return _text(node)
            if kind is cst.Attribute and node.attr.value in _TENSOR_MODES:  # type: ignore[attr-defined]
                return _text(node)
        elif kind is cst.Name and depth < 2:
            binding = ctx.resolver.lookup(node.value)  # type: ignore[attr-defined]
            values = [binding.value] if binding is not None and binding.value is not None else []
            values += ctx.constants.get(node.value, [])  # type: ignore[attr-defined]
            for value in values:
                if isinstance(value, cst.BaseExpression):
                    inner = process_read(ctx, value, depth + 1)
                    if inner is not None:
                        return f"{node.value} = {inner}"  # type: ignore[attr-defined]
    return None


def _text(node: cst.CSTNode) -> str:
    return cst.Module(body=[]).code_for_node(node)[:80]
