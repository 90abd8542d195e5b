from __future__ import annotations

from gatekeeper.report import Category, Confidence, Severity
from gatekeeper.static.cpp_sources import CppSource
from gatekeeper.static.rule import Rule
from gatekeeper.static.examples import Invalid, Valid, snippet

_TENSOR_TYPES = frozenset({"Tensor", "optional", "map", "unordered_map", "vector", "array"})


class ReturnsStaticTensorFromExtension(Rule):
    """The C++ side keeps a tensor (or a container of tensors) in a `static` variable and
    returns it: `static torch::Tensor out; if (!out.defined()) out = ...; return out;`.

    Why it games the benchmark: it is the Python cached-output hack moved where Python-only
    checkers do not look. Every call returns the same storage. The same holds for an entry
    of a `static` table of tensors (keyed on a pointer or on a fingerprint of sampled
    elements) returned directly or as a copy (`auto hit = table.find(key); ... return
    hit->second.clone();`): a result memo in C++.

    Known false-positive patterns it does not fire on, and why: a `static` scratch
    workspace or plan table that is used but never returned (`return out;` of a fresh
    tensor), and statics of non-tensor types (launch configurations, handles).
    """

    code = "GK105"
    name = "ReturnsStaticTensorFromExtension"
    category = Category.CACHED_OUTPUT
    severity = Severity.ERROR
    summary = "C++ extension returns a tensor kept in a static variable"
    message = "The extension returns `{name}`, a `static` tensor that survives between calls: every call hands back the same storage."
    copy = ("The extension returns `{expr}`, a copy of `{name}`, a `static` tensor that survives between calls: "
            "unless this call rewrote it, the contents stored by an earlier call are handed back.")
    entry = ("The extension returns `{expr}`, an entry of the `static` table `{name}` that survives between calls: "
             "a result stored by an earlier call is handed back without computing.")
    hint = "Allocate the output inside the function on every call (`auto out = torch::empty_like(x);`) and return that; keep only scratch buffers static."

    VALID = [
        Valid(snippet("""
            src = '''
            #include <torch/extension.h>
            torch::Tensor f(torch::Tensor x) {
              static torch::Tensor ws;
              if (!ws.defined()) ws = torch::empty({1024}, x.options());
              auto out = torch::empty_like(x);
              k(x, ws, out);
              return out;
            }
            '''
        """)),
    ]
    INVALID = [
        Invalid(snippet("""
            src = '''
            #include <torch/extension.h>
            torch::Tensor f(torch::Tensor x) {
              static torch::Tensor out;
              if (!out.defined()) out = torch::empty_like(x);
              k(x, out);
              return out;
            }
            '''
        """), line=7, message="The extension returns `out`"),
        Invalid(snippet("""
            src = '''
            #include <torch/extension.h>
            #include <unordered_map>
            at::Tensor f(at::Tensor x) {
              static std::unordered_map<int64_t, at::Tensor> cache;
              auto key = (int64_t)x.data_ptr();
              if (cache.count(key)) return cache[key];
              auto y = x * 2;
              cache[key] = y;
              return y;
            }
            '''
        """), line=7, message="The extension returns `cache[key]`"),
        # fingerprint-keyed static table, hit returned as a clone through an iterator
        Invalid(snippet("""
            src = '''
            #include <torch/extension.h>
            #include <unordered_map>
            torch::Tensor f(torch::Tensor x) {
              static std::unordered_map<uint64_t, torch::Tensor> table;
              uint64_t key = fp(x.data_ptr<float>());
              auto hit = table.find(key);
              if (hit != table.end()) return hit->second.clone();
              auto y = torch::empty_like(x);
              k(x, y);
              table[key] = y.clone();
              return y;
            }
            '''
        """), line=8, message="The extension returns `hit->second.clone()`"),
    ]

    def check_cpp(self, source: CppSource) -> None:
        tokens = source.tokens
        statics: dict[str, int] = {}
        plain: set[str] = set()  # a single static tensor, not a table of them
        for i in source.by_text["ident"].get("static", ()):
            tok = tokens[i]
            # static <type tokens...> NAME ; | = | ( | {
            j = i + 1
            saw_tensor = False
            container = False
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
                if text in ("map", "unordered_map", "vector", "array", "deque", "list"):
                    container = True
                if depth <= 0 and tokens[j].kind == "ident" and j + 1 < len(tokens) and tokens[j + 1].text in (";", "=", "{") and j > i + 1:
                    if saw_tensor:
                        statics[text] = tok.offset
                        if not container:
                            plain.add(text)
                    break
                if text in ("(", ";", "{") and depth <= 0:
                    break
                j += 1
        if not statics:
            return
        for fn in source.functions:
            aliases: dict[str, str] = {}  # local bound from a static table -> that table
            for k in range(fn.body_start, fn.body_end):
                text = tokens[k].text
                if text == "=" and k > 0 and tokens[k - 1].kind == "ident":
                    # `auto hit = table.find(key)`, `auto& y = cache[k]`: a lookup, not a use
                    rhs = next((t.text for t in tokens[k + 1:k + 3] if t.text not in ("&", "*")), None)
                    if rhs in statics:
                        aliases[tokens[k - 1].text] = rhs
                if text != "return" or k + 1 >= len(tokens):
                    continue
                first = tokens[k + 1].text
                end = _statement_end(tokens, k, fn.body_end)
                if first in statics and end == k + 2:
                    self.report_cpp(source, tokens[k].offset, self.message.format(name=first), evidence={"static": first})
                elif first in plain:
                    # `return last.clone();`: a copy of the static tensor (a method other
                    # than a copy or view, `w_t.mm(x)`, computes from it and is fine)
                    if k + 3 < end and tokens[k + 2].text == "." and tokens[k + 3].text in _COPIES:
                        expr = "".join(t.text for t in tokens[k + 1:end])[:60]
                        self.report_cpp(source, tokens[k].offset, self.copy.format(expr=expr, name=first),
                                        evidence={"static": first, "returns": expr}, confidence=Confidence.LIKELY)
                elif first in statics or first in aliases:
                    table = first if first in statics else aliases[first]
                    expr = "".join(t.text for t in tokens[k + 1:end])[:60]
                    self.report_cpp(source, tokens[k].offset, self.entry.format(expr=expr, name=table),
                                    evidence={"static": table, "returns": expr})


_COPIES = frozenset({"clone", "detach", "contiguous", "to", "view", "reshape"})


def _statement_end(tokens, start: int, limit: int) -> int:
    """Index of the `;` that ends the statement starting at `start`."""
    depth = 0
    for i in range(start, min(limit, len(tokens))):
        text = tokens[i].text
        if text in ("(", "[", "{"):
            depth += 1
        elif text in (")", "]", "}"):
            depth -= 1
        elif text == ";" and depth <= 0:
            return i
    return limit
