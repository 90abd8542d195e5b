"""Finds torch compute and own-kernel launches during the engine's one traversal.

Not a rule file: it defines no rule with a `code`. One `TorchUsage` per file is shared by
every GK3xx rule (kept on the FileContext); the first GK3xx rule constructed feeds it the
traversal events, and every rule reads the finished result in `finish()`.

A *use* is one place where torch (or ATen, or a vendor library) computes: a torch function,
an nn layer, a tensor compute method, an arithmetic operator on a tensor, a torch.ops.aten
op, or a C++ call. An *own kernel* is a launch of the submission's own code: a Triton (or
other JIT) kernel, a function of an extension built with load_inline/load (held by a name,
`self.X`, or a class attribute; also `self.op = _ext.fn` then `self.op(x)`), a
torch.ops.<own namespace> op, or a call of a helper / autograd Function of the file that
launches one. Whether a use or a launch is in the forward path is decided in `resolve()`,
when the call graph is complete; which launches count as the own kernel doing work on the
forward path is launch_placement.py's (token launches on a constant sliver, launches whose
output never reaches the result), and torch whose value never reaches the result is dropped
(torch_result_flow.py).
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from gatekeeper.analyses.cpp_torch_calls import scan_cpp
from gatekeeper.analyses.torch_fallback_paths import find_fallbacks
from gatekeeper.analyses.kernel_work import torch_does_whole_op
from gatekeeper.analyses.launch_placement import library_constant, place_kernels, pure_call
from gatekeeper.analyses.own_callables import OwnCallables
from gatekeeper.analyses.self_attr_calls import resolve_self_calls
from gatekeeper.analyses.torch_result_flow import use_outside_result
from gatekeeper.analyses.tensor_values import TensorValues
from gatekeeper.analyses.torch_call_kinds import TorchCalls
from gatekeeper.analyses.binding_records import RecordsBindings
from gatekeeper.analyses.torch_op_table import TorchOps, short_op, torch_ops
from gatekeeper.analyses.torch_usage_model import (
    Kernel, Use, extension_module, Frame, path_to_function, tensor_params,
)
from gatekeeper.static.syntax import is_self_attr
from gatekeeper.static.context import FileContext
from gatekeeper.static.cpp_functions import CppFunction
from gatekeeper.static.cpp_sources import LOADERS, CppSource
from gatekeeper.static.names import string_value
from gatekeeper.analyses.op_registrations import (
    is_body_decorator, note_body, note_namespace, registered_namespace, without_own_op_calls,
)

_ATTR = "_gk3_torch_usage"


class TorchUsage(TorchCalls, TensorValues, RecordsBindings):
    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        self.ops: TorchOps = torch_ops()
        self.uses: list[Use] = []
        self.kernels: list[Kernel] = []
        self.frames: list[Frame] = []
        self.kernel_defs: set[str] = set()
        self.loader_functions: set[str] = set()  # functions whose body calls load_inline
        self.holders: set[str] = set()  # names / self.X bound to an extension module
        self.holder_calls: dict[str, str] = {}  # name -> function it was assigned from
        self.ext_functions: set[str] = set()  # functions=[...] and C++ function names
        self.self_layers: dict[str, list[str]] = {}  # self attr -> torch.nn classes in it
        self.self_tensors: set[str] = set()
        self.self_foreign: set[str] = set()  # self attrs holding containers or non-torch objects
        self.class_attrs: dict[str, str] = {}  # class-body `op = torch.mean`
        self.self_ext: dict[str, tuple[str, str, Optional[str]]] = {}  # self attr -> (receiver, attr, qualname)
        self.self_passed: set[str] = set()  # self attrs bound to a constructor parameter
        self.self_calls: list[tuple[str, cst.Call, str, tuple[cst.CSTNode, ...]]] = []
        self.has_cuda_kernel = False
        self.has_own_loops = False
        self._function_cache: dict[int, list[CppFunction]] = {}
        self.cpp_seen = False
        self.token_kernels: list[Kernel] = []
        self.idle_kernels: list[Kernel] = []  # launches whose output never reaches the result
        self.opaque_calls: list[str] = []  # forward-path calls of callables fetched at run time
        self._whole_op: Optional[bool] = None
        self._own: Optional[OwnCallables] = None
        self._resolved = False

    @classmethod
    def of(cls, ctx: FileContext) -> tuple["TorchUsage", bool]:
        """The file's shared instance, and whether the caller is the first (the feeder)."""
        existing = ctx.__dict__.get(_ATTR)
        if existing is not None:
            return existing, False
        usage = cls(ctx)
        ctx.__dict__[_ATTR] = usage
        return usage, True

    # traversal events -----------------------------------------------------------
    def enter_function(self, node: cst.FunctionDef) -> None:
        outer_kernel = bool(self.frames) and self.frames[-1].kernel_def
        kernel_def = outer_kernel or any(self._is_kernel_decorator(d) for d in node.decorators)
        if kernel_def:
            self.kernel_defs.add(node.name.value)
        if any(is_body_decorator(self.ctx.qualname(d.decorator.func if type(d.decorator) is cst.Call else d.decorator))
               for d in node.decorators):
            note_body(self.ctx, self.ctx.function_key)  # @torch.library.custom_op("ns::op"): the op's body
        frame = Frame(self.ctx.function_key, kernel_def)
        if node.name.value in ("forward", "__call__") and self.ctx.classes:
            frame.tensor_names.update(tensor_params(node.params))
        self.frames.append(frame)

    def leave_function(self) -> None:
        if self.frames:
            self.frames.pop()

    def _is_kernel_decorator(self, decorator: cst.Decorator) -> bool:
        expr = decorator.decorator
        if type(expr) is cst.Call:
            expr = expr.func
        qual = self.ctx.qualname(expr)
        return bool(qual) and self.ops.is_kernel_decorator(qual)  # type: ignore[arg-type]

    @property
    def _in_kernel(self) -> bool:
        return bool(self.frames) and self.frames[-1].kernel_def

    def loop(self, node: cst.For) -> None:
        """`for layer in self.layers:` makes `layer(x)` a call of what self.layers holds."""
        if not self.frames or type(node.target) is not cst.Name:
            return
        it = node.iter
        if type(it) is cst.Attribute and type(it.value) is cst.Name and it.value.value == "self":
            self.frames[-1].layer_aliases[node.target.value] = it.attr.value

    def call(self, node: cst.Call) -> None:
        ctx = self.ctx
        func = node.func
        qual = ctx.qualname(func)
        if self._is_loader_call(node):
            self.loader_functions.add(ctx.function_key)
            self._record_ext_names(node)
            return
        ns = registered_namespace(qual, node)
        if ns is not None:  # decorators too: `@torch.library.custom_op("ns::op")`
            note_namespace(ctx, ns)
        if self._in_kernel:
            return
        if type(ctx.parent(node)) is cst.Decorator:
            return
        self._functions_handed_on(node, qual)
        # own kernels --------------------------------------------------------------
        if type(func) is cst.Subscript and qual is None:  # (`torch.__dict__["mm"]` resolves: torch's below)
            if self.fetched_method_call(node) or self.scipy_routine(node, func):  # type(x).__dict__["mm"](x, b)
                return
            base = func.value
            base_qual = ctx.qualname(base)
            if is_self_attr(base):  # self.layers[i](x): a call of what the container holds
                self.self_calls.append((base.attr.value, node, ctx.function_key, ()))  # type: ignore[union-attr]
            elif type(base) is cst.Name and base_qual is None:  # kernel[grid](...)
                binding = ctx.resolver.lookup(base.value)
                table = self._torch_table(binding.value if binding is not None else None)
                if table is not None:  # OPS["mean"](x): a dict or list of torch functions
                    self._table_call(node, table)
                else:
                    self._kernel(node, f"{base.value}[grid]", needs_def=None if binding is None else base.value)
            elif base_qual and not base_qual.startswith(("torch.", "builtins.")):
                self._kernel(node, f"{base_qual}[grid]")
            return
        if type(func) is cst.Name and qual is None:
            table = self._table_entry(func.value)
            if table is not None:  # op = OPS["mean"]; op(x): a call of what the table holds
                self._table_call(node, table)
                return
            qual = self._star_import(func.value)
            if qual is None:
                self._kernel(node, func.value, needs_def=func.value)
                self._maybe_layer_name(node, func.value)
                return
        if qual == "operator.methodcaller" and node.args:  # methodcaller("sum", 0): x.sum(0) when applied
            name = string_value(node.args[0].value)
            if name and self.ops.method_is_compute(name):
                self._use("method", f"Tensor.{name}", node, op=name, deferred=True)
            return
        if qual is not None and qual.startswith(("builtins.", "operator.", "einops.", "opt_einsum.", "functools.reduce", "numpy.", "scipy.",
                                                     "cupy.", "cupyx.", "jax.", "dpnp.")):
            self._python_compute(node, qual)
            return
        if qual is not None and qual.startswith("torch."):
            self._torch_call(node, qual)
            return
        if qual is not None and type(func) is cst.Attribute and extension_module(qual):
            self._kernel(node, qual)  # a prebuilt extension: import fused_cuda; fused_cuda.f(x)
            return
        if qual is None and type(func) is cst.Call:
            inner = ctx.qualname(func.func) or ""
            if self._nn_compute_class(inner):
                self._use("layer", inner, node, op=inner.rsplit(".", 1)[-1])
            elif not self.fetched_method_call(node):  # getattr(x, "mean")(0), object.__getattribute__(x, _SLOT)(b)
                self.scipy_routine(node, func)  # get_blas_funcs("gemm", (a, b))(1.0, a, b)
            return
        if qual == "functools.partial" and node.args:  # partial(torch.mean, dim=0): a deferred call
            target = ctx.qualname(node.args[0].value) or ""
            last = target.rsplit(".", 1)[-1]
            if target.startswith("torch.") and self.ops.function_is_compute(target) \
                    and not any(p[:1].isupper() for p in target.split(".")):
                self._use("function", target, node, op=last, deferred=True)
            elif target.startswith("torch.Tensor.") and target.count(".") == 2 and self.ops.method_is_compute(last):
                self._use("method", target, node, op=last, deferred=True)  # partial(torch.Tensor.mean, dim=0)
            elif target.startswith("operator.") and self.ops.method_is_compute(last):
                self._use("function", target, node, op=last, deferred=True)  # partial(operator.matmul)
            elif not target or target.startswith("scipy."):  # partial(p.mm), partial(blas.sgemm, 1.0)
                self.method_as_value(node, node.args[0].value) or self.scipy_value(node, node.args[0].value)
            return
        if qual is None and type(func) is cst.Attribute:
            self._method_call(node, func)


    def _path(self, node: cst.CSTNode) -> tuple[cst.CSTNode, ...]:
        return path_to_function(self.ctx, node)

    def _use(self, kind: str, qual: str, node: cst.CSTNode, *, op: str, heavy: Optional[bool] = None,
             receiver: Optional[str] = None, deferred: bool = False, more_layers: int = 0) -> None:
        if self._in_kernel:
            return  # the submission's own kernel code
        path = self._path(node)
        deferred = deferred or any(type(p) is cst.Lambda for p in path)
        if not self.frames and not deferred:
            return  # module level: import-time set-up (a module-level lambda runs later)
        if heavy is None:
            heavy = self.ops.is_heavy(op, qual)
        self.uses.append(Use(kind, short_op(op), qual, heavy, self.ctx.function_key, node, path,
                             receiver=receiver, deferred=deferred, more_layers=more_layers))

    def _kernel(self, node: cst.CSTNode, what: str, *, needs_def: Optional[str] = None,
                needs_ext: Optional[tuple[str, str]] = None) -> None:
        if not self.frames:
            return
        self.kernels.append(Kernel(what, self.ctx.function_key, (), node, needs_def, needs_ext))

    def _is_loader_call(self, value: cst.BaseExpression) -> bool:
        if type(value) is not cst.Call:
            return False
        qual = self.ctx.qualname(value.func) or ""
        if qual in LOADERS:
            return True
        return type(value.func) is cst.Name and value.func.value == "load_inline"

    def _record_ext_names(self, call: cst.Call) -> None:
        for arg in call.args:
            if arg.keyword is not None and arg.keyword.value == "functions":
                values = arg.value.elements if (type(arg.value) in (cst.List, cst.Tuple)) else [arg.value]
                for element in values:
                    text = string_value(element.value if isinstance(element, cst.BaseElement) else element)
                    if text:
                        self.ext_functions.add(text)


    def cpp(self, source: CppSource) -> None:
        if not source.text.strip() or (source.origin == "string literal" and not _looks_like_code(self.ctx, source)):
            return
        self.cpp_seen = True
        has_kernel, found = scan_cpp(source, self.ops, self._functions)
        self.has_cuda_kernel |= has_kernel
        # A CPU extension's own loops are its kernel (the CPU fixtures in CI are such).
        self.has_own_loops |= "for" in source.by_text["ident"] or "while" in source.by_text["ident"]
        for kind, chain, offset, op in found:
            self.uses.append(Use(kind, short_op(op), chain, kind == "vendor" or self.ops.is_heavy(op), cpp=(source, offset)))

    # after the traversal ---------------------------------------------------------------
    def resolve(self) -> None:
        if self._resolved:
            return
        self._resolved = True
        resolve_self_calls(self)  # what each `self.X(...)` call is (self_attr_calls.py)
        if any(u.node is not None and u.kind == "layer" for u in self.uses):
            self._dedupe_layers()
        holders = set(self.holders) | {n for n, f in self.holder_calls.items() if f in self.loader_functions}
        if any(k.needs_ext is not None and k.needs_ext[0] not in holders for k in self.kernels):
            for source in self.ctx.cpp_sources:
                self.ext_functions.update(fn.name for fn in self._functions(source) if not fn.is_kernel)
        self.kernels = without_own_op_calls(self.ctx, self.kernels)  # torch.ops of a namespace the file registers
        place_kernels(self, holders)  # which launches are the own kernel doing work (launch_placement.py)
        # a method named like an extension function, on a receiver that is the extension
        self.uses = [u for u in self.uses if not (u.kind == "method" and u.receiver is not None
                                                   and (u.receiver in holders or u.receiver.removeprefix("call:") in self.loader_functions))]
        self.uses = [u for u in self.uses if u.cpp is not None or self.in_forward(u.function)
                     or (u.deferred and self._deferred(u.function))]
        # torch whose value never reaches the result (a build-time self-test, a check that
        # only raises) does not do the timed work
        self.uses = [u for u in self.uses if u.cpp is not None or not use_outside_result(u, lambda c: pure_call(self, c),
                                                                                     lambda e: library_constant(self, e))]
        find_fallbacks(self)
        self._own = None  # it points back at this usage: kept, the pair would leave the tree to the collector

    def _functions(self, source: CppSource) -> list[CppFunction]:
        """C++ function definitions of a source, computed once per file."""
        found = self._function_cache.get(id(source))
        if found is None:
            found = self._function_cache[id(source)] = source.functions
        return found

    def _dedupe_layers(self) -> None:
        seen: set[int] = set()
        out = []
        for use in self.uses:
            if use.kind == "layer" and use.node is not None:
                if id(use.node) in seen:
                    continue
                seen.add(id(use.node))
            out.append(use)
        self.uses = out

    def _deferred(self, key: str) -> bool:
        """A lambda written in __init__ or at module level runs later (stored, compiled,
        called from forward); only harness glue such as get_inputs is exempt."""
        return key.rsplit(".", 1)[-1] not in self.ops.exempt_functions

    def in_forward(self, key: str) -> bool:
        """Runs when the model is called: not construction or import time, not harness
        glue (get_inputs), not backward, not a copy of the reference `Model`."""
        last = key.rsplit(".", 1)[-1]
        if last in self.ops.exempt_functions:
            return False
        if key.startswith("Model.") and "ModelNew.forward" in self.ctx.defined:
            return False
        return not self.ctx.is_init_only(key)

    def own_callables(self) -> OwnCallables:
        """The file's bindings, indexed on first need (own_callables.py)."""
        if self._own is None:
            self._own = OwnCallables(self)
        return self._own

    @property
    def builds_own_code(self) -> bool:
        """The file compiles or defines code of its own somewhere (a kernel source, a JIT
        kernel, an extension or native library it loads)."""
        return self.has_cuda_kernel or bool(self.kernel_defs or self.holders or self.loader_functions)

    @property
    def own_kernel(self) -> Optional[Kernel]:
        return self.kernels[0] if self.kernels else None

    def torch_does_whole_op(self) -> bool:
        if self._whole_op is None:
            self._whole_op = torch_does_whole_op(self)
        return self._whole_op


def _looks_like_code(ctx: FileContext, source: CppSource) -> bool:
    """A string literal that was not handed to a loader counts as C++ only if it has a body
    and is not a docstring (a docstring that mentions torch::mean is not code)."""
    if "{" not in source.text:
        return False
    for segment in source.segments:
        if segment.node is not None and type(ctx.parent(segment.node)) is cst.Expr:
            return False
    return True
