from __future__ import annotations

from typing import Optional

import libcst as cst

from gatekeeper.report import Category, Severity
from gatekeeper.analyses.stream_support import idents
from gatekeeper.static.cpp_sources import CppSource
from gatekeeper.static.rule import Rule
from gatekeeper.static.examples import Invalid, Valid, snippet

TENSOR_BASES = frozenset({
    "torch.Tensor", "torch._tensor.Tensor", "torch._C._TensorBase", "torch._C.TensorBase",
    "torch.nn.Parameter", "torch.nn.parameter.Parameter", "torch.nn.Buffer", "torch.nn.parameter.Buffer",
})
# Methods that build a tensor of another class around (or instead of) real storage.
SUBCLASS_FACTORIES = frozenset({"_make_subclass", "_make_wrapper_subclass", "as_subclass"})


class TensorSubclass(Rule):
    """The submission defines or builds a `torch.Tensor` subclass: `class T(torch.Tensor)`
    (also through aliases, `nn.Parameter`, or a subclass of such a class), `type("T",
    (torch.Tensor,), {...})`, `torch.Tensor._make_subclass`, `_make_wrapper_subclass`,
    `x.as_subclass(T)`, or swaps an output's class with `y.__class__ = T`. In C++: a class
    deriving from `c10::TensorImpl`, or `at::detail::make_tensor<...>` with a custom impl.
    `make_tensor<c10::TensorImpl>` (the base class itself, e.g. two plain tensors laid over
    one allocation) builds a plain tensor and is not flagged.

    Why it games the benchmark: the output is no longer a plain tensor. A subclass can defer
    the computation until it is compared, answer `allclose`/`==` with what the checker wants,
    carry no storage at all (`_make_wrapper_subclass`), or report a shape it does not have.
    The timed call then measures nothing.

    Not flagged: `torch.Tensor` as a type annotation, `isinstance(x, torch.Tensor)`,
    `torch.Tensor(...)` / `torch.empty(...)` constructors, and `nn.Module` subclasses.
    """

    code = "GK520"
    name = "TensorSubclass"
    category = Category.LAZY_OUTPUT
    severity = Severity.ERROR
    summary = "defines or builds a torch.Tensor subclass"
    message = (
        "{what}: a tensor subclass can defer the computation until the output is compared, or answer the "
        "comparison itself, so the benchmark times and checks something other than a computed tensor."
    )
    hint = (
        "Return a plain `torch.Tensor` whose storage your kernel has written before `forward` returns, "
        "e.g. `out = torch.empty(shape, device=x.device, dtype=x.dtype)`, launch, `return out`."
    )
    VALID = [
        Valid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x: torch.Tensor) -> torch.Tensor:
                    assert isinstance(x, torch.Tensor)
                    out = torch.empty_like(x)
                    _ext.run(x, out)
                    return out
        """)),
        Valid(snippet("""
            from torch import Tensor
            def helper(x: Tensor) -> Tensor:
                return x.contiguous()
        """)),
        # the base TensorImpl: a plain tensor laid over an allocation it is given
        Valid(snippet("""
            src = r'''
            torch::Tensor f(torch::Tensor x, c10::Storage st) {
              return at::detail::make_tensor<c10::TensorImpl>(std::move(st), x.key_set(), x.dtype());
            }
            '''
        """)),
    ]
    INVALID = [
        Invalid(snippet("""
            import torch
            class Lazy(torch.Tensor):
                pass
        """), line=2, message="`Lazy` subclasses `torch.Tensor`"),
        Invalid(snippet("""
            import torch as T
            Base = T.Tensor
            class Lazy(Base):
                pass
            class Lazier(Lazy):
                pass
        """), line=3, message="`Lazy` subclasses `torch.Tensor`"),
        Invalid(snippet("""
            import torch
            def wrap(x):
                return torch.Tensor._make_wrapper_subclass(Thunk, x.shape, dtype=x.dtype)
        """), line=3, message="`_make_wrapper_subclass` builds a tensor of another class"),
        Invalid(snippet("""
            import torch
            T = type('T', (torch.Tensor,), {})
        """), line=2, message="`type(...)` creates a `torch.Tensor` subclass"),
        Invalid(snippet("""
            class Lazy:
                pass
            def forward(x):
                y = x.clone()
                y.__class__ = Lazy
                return y
        """), line=5, message="`__class__ = Lazy` swaps an object's class"),
        Invalid(snippet("""
            src = r'''
            struct LazyImpl : public c10::TensorImpl { using TensorImpl::TensorImpl; };
            torch::Tensor f(torch::Tensor x) { return at::detail::make_tensor<LazyImpl>(x.key_set(), x.dtype()); }
            '''
        """), line=2, message="A C++ class derives from `TensorImpl`"),
        # an impl declared in a header, only named here
        Invalid(snippet("""
            src = r'''
            torch::Tensor f(torch::Tensor x) { return at::detail::make_tensor<LazyImpl>(x.key_set(), x.dtype()); }
            '''
        """), line=2, message="`make_tensor<LazyImpl>` builds a custom tensor"),
    ]

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.subclasses: set[str] = set()
        self.classes: set[str] = set()
        self.swaps: list[tuple[cst.AssignTarget, str]] = []

    def _is_tensor_base(self, expr: cst.BaseExpression) -> bool:
        if type(expr) is cst.Name and expr.value in self.subclasses:
            return True
        return self.ctx.qualname(expr) in TENSOR_BASES

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.classes.add(node.name.value)
        for base in node.bases:
            if base.keyword is None and self._is_tensor_base(base.value):
                self.subclasses.add(node.name.value)
                self.report(node.name, self.message.format(what=f"`{node.name.value}` subclasses `torch.Tensor`"),
                            evidence={"class": node.name.value})
                return

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if type(func) is cst.Attribute and func.attr.value in SUBCLASS_FACTORIES:
            self.report(node, self.message.format(what=f"`{func.attr.value}` builds a tensor of another class"),
                        evidence={"factory": func.attr.value})
            return
        if type(func) is cst.Name and func.value == "type" and len(node.args) == 3 \
                and self.ctx.qualname(func) == "builtins.type":
            bases = node.args[1].value
            if type(bases) in (cst.Tuple, cst.List) and any(self._is_tensor_base(e.value) for e in bases.elements):
                self.report(node, self.message.format(what="`type(...)` creates a `torch.Tensor` subclass"))

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        target = node.target
        if type(target) is cst.Attribute and target.attr.value == "__class__":
            value = self.ctx.parent(node)
            new_class = _name_of(value.value) if (type(value) is cst.Assign) else None
            if new_class is not None:
                self.swaps.append((node, new_class))

    def finish(self) -> None:
        # decided at the end: the class may be defined below the function that swaps it in
        for node, new_class in self.swaps:
            if new_class in self.classes:
                self.report(node, self.message.format(what=f"`__class__ = {new_class}` swaps an object's class"),
                            evidence={"class": new_class})

    def check_cpp(self, source: CppSource) -> None:
        if not idents(source) & {"TensorImpl", "make_tensor"}:
            return
        tokens = source.tokens
        for i, tok in enumerate(tokens):
            if tok.kind != "ident":
                continue
            if tok.text == "TensorImpl" and _is_base_clause(tokens, i):
                self.report_cpp(source, tok.offset, self.message.format(what="A C++ class derives from `TensorImpl`"))
            elif tok.text == "make_tensor" and i + 1 < len(tokens) and tokens[i + 1].text == "<":
                impl = _template_argument(tokens, i + 1)
                if impl == "TensorImpl":
                    continue  # the base class itself: a plain tensor over the storage it is given
                self.report_cpp(source, tok.offset, self.message.format(
                    what=f"`make_tensor<{impl or '...'}>` builds a custom tensor"), evidence={"impl": impl})


def _name_of(expr: cst.BaseExpression) -> Optional[str]:
    return expr.value if (type(expr) is cst.Name) else None


def _template_argument(tokens, open_index: int) -> Optional[str]:
    """`make_tensor<c10::TensorImpl>` -> "TensorImpl": the last name of a one-type argument
    list; None when the list holds more than a (qualified) name."""
    last = None
    for j in range(open_index + 1, min(open_index + 12, len(tokens))):
        text = tokens[j].text
        if text == ">":
            return last
        if text == "::" or (text in ("c10", "at") and tokens[j + 1].text == "::"):
            continue
        if tokens[j].kind != "ident" or last is not None:
            return None
        last = text
    return None


def _is_base_clause(tokens, i: int) -> bool:
    """`struct X : public c10::TensorImpl` — walk back over `c10 ::`, access specifiers to `:`."""
    j = i - 1
    while j >= 0 and tokens[j].text in ("::", "c10", "at", "public", "protected", "private", "virtual"):
        j -= 1
    return j >= 0 and tokens[j].text in (":", ",")
