from __future__ import annotations

from gatekeeper.report import Category, Severity
from gatekeeper.static.cpp_sources import CppSource
from gatekeeper.static.rule import Rule

_TENSOR_TYPES = frozenset({"Tensor", "optional", "map", "unordered_map", "vector", "array"})


class ReturnsStaticTensorFromExtension(Rule):
    """The C++ side keeps a tensor (or a container of tensors) in a `static` variable and
    returns it: `static torch::Tensor out; if (!out.defined()) out = ...; return out;`.

    Why it games the benchmark: it is the Python cached-output hack moved where Python-only
    checkers do not look. Every call returns the same storage. A `static` scratch workspace
    that is never returned is not flagged.
    """

    code = "GK105"
    name = "ReturnsStaticTensorFromExtension"
    category = Category.CACHED_OUTPUT
    severity = Severity.ERROR
    summary = "C++ extension returns a tensor kept in a static variable"
    message = "The extension returns `{name}`, a `static` tensor that survives between calls: every call hands back the same storage."
    hint = "Allocate the output inside the function on every call (`auto out = torch::empty_like(x);`) and return that; keep only scratch buffers static."

    VALID = [
        "src = '''\n#include <torch/extension.h>\ntorch::Tensor f(torch::Tensor x) {\n  static torch::Tensor ws;\n"
        "  if (!ws.defined()) ws = torch::empty({1024}, x.options());\n  auto out = torch::empty_like(x);\n  k(x, ws, out);\n  return out;\n}\n'''\n",
    ]
    INVALID = [
        "src = '''\n#include <torch/extension.h>\ntorch::Tensor f(torch::Tensor x) {\n  static torch::Tensor out;\n"
        "  if (!out.defined()) out = torch::empty_like(x);\n  k(x, out);\n  return out;\n}\n'''\n",
        "src = '''\n#include <torch/extension.h>\n#include <unordered_map>\nat::Tensor f(at::Tensor x) {\n"
        "  static std::unordered_map<int64_t, at::Tensor> cache;\n  auto key = (int64_t)x.data_ptr();\n"
        "  if (cache.count(key)) return cache[key];\n  auto y = x * 2;\n  cache[key] = y;\n  return y;\n}\n'''\n",
    ]

    def check_cpp(self, source: CppSource) -> None:
        tokens = source.tokens
        statics: dict[str, int] = {}
        for i, tok in enumerate(tokens):
            if tok.text != "static" or tok.kind != "ident":
                continue
            # static <type tokens...> NAME ; | = | ( | {
            j = i + 1
            saw_tensor = False
            depth = 0
            while j < len(tokens) and j < i + 40:
                text = tokens[j].text
                if text == "<":
                    depth += 1
                elif text == ">":
                    depth -= 1
                elif text == ">>":
                    depth -= 2
                if tokens[j].kind == "ident" and text in ("Tensor",):
                    saw_tensor = True
                if depth <= 0 and tokens[j].kind == "ident" and j + 1 < len(tokens) and tokens[j + 1].text in (";", "=", "{") and j > i + 1:
                    if saw_tensor:
                        statics[text] = tok.offset
                    break
                if text in ("(", ";", "{") and depth <= 0:
                    break
                j += 1
        if not statics:
            return
        for fn in source.functions:
            for k in range(fn.body_start, fn.body_end):
                if tokens[k].text == "return" and k + 1 < len(tokens) and tokens[k + 1].text in statics:
                    name = tokens[k + 1].text
                    self.report_cpp(source, tokens[k].offset, self.message.format(name=name), evidence={"static": name})
