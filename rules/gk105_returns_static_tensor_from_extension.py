from __future__ import annotations

from gatekeeper.report import Category, Confidence, Severity
from gatekeeper.analyses.cpp_output_memo import persistent_names
from gatekeeper.analyses.cpp_static_replay import fill_reads_an_input, replays, writes_outside_fill
from gatekeeper.analyses.cpp_static_writes import caller_writes, in_fill_guard, internal_getter, written_before
from gatekeeper.analyses.cpp_static_structs import member_returns, member_target, persistent_structs, tensor_structs
from gatekeeper.static.cpp_sources import CppSource
from gatekeeper.static.rule import Rule
from gatekeeper.static.examples import Invalid, Valid, snippet

_TENSOR_TYPES = frozenset({"Tensor", "optional", "map", "unordered_map", "vector", "array"})


class ReturnsStaticTensorFromExtension(Rule):
    """The C++ side keeps a tensor (or a container of tensors) in static storage (a `static`
    or `thread_local` variable, or one declared at namespace scope: a global, or inside
    `namespace { ... }`) and returns it: `static torch::Tensor out; if (!out.defined()) out = ...; return out;`.

    Why it games the benchmark: it is the Python cached-output hack moved where Python-only
    checkers do not look. Every call returns the same storage. The same holds for an entry
    of a `static` table of tensors (keyed on a pointer or on a fingerprint of sampled
    elements) returned directly or as a copy (`auto hit = table.find(key); ... return
    hit->second.clone();`): a result memo in C++. So is a static that nothing writes but its
    fill under `if (!last.defined())`, copied into fresh storage on every call
    (`y.copy_(last)`, `cudaMemcpy(y.data_ptr(), last.data_ptr(), ...)`), and a tensor member of
    a struct in static storage (`static Cache& cache()`, then `return c.out;`).

    A static output that this call hands to a kernel or writes in place before returning
    it (`k<<<...>>>(x.data_ptr<float>(), out.data_ptr<float>()); return out;`) is output
    storage reused with fresh values, the C++ form of GK101's rewritten buffer: `likely`,
    a warning outside `strict` until the two-call run-time check settles it (GK610 when the
    second call returns stale values, GK612 when it only reuses the storage). Returned with
    no write on the way, it is certain.

    Known false-positive patterns it does not fire on, and why: a `static` scratch
    workspace or plan table that is used but never returned (`return out;` of a fresh
    tensor); a getter that returns a function-static scratch tensor (`torch::Tensor&
    counters() { static torch::Tensor b = ...; return b; }`) when every caller in the
    sources only uses the result (`counters().data_ptr()`) and none returns or keeps it;
    and statics of non-tensor types (launch configurations, handles).
    """

    code = "GK105"
    name = "ReturnsStaticTensorFromExtension"
    category = Category.CACHED_OUTPUT
    severity = Severity.ERROR
    confirmed_by = "GK610"
    summary = "C++ extension returns a tensor kept in a static variable"
    message = "The extension returns `{name}`, a tensor in static storage (`static`, `thread_local` or namespace scope) that survives between calls: every call hands back the same storage."
    rewritten = ("The extension returns `{name}`, a tensor in static storage (`static`, `thread_local` or namespace scope) that survives between calls; this call writes it "
                 "first, so the work is done but every call hands back the same storage (output storage reused): a "
                 "caller that keeps the previous result sees it overwritten. The two-call run-time check settles it.")
    copy = ("The extension returns `{expr}`, a copy of `{name}`, a tensor in static storage (`static`, `thread_local` or namespace scope) that survives between calls: "
            "unless this call rewrote it, the contents stored by an earlier call are handed back.")
    entry = ("The extension returns `{expr}`, an entry of `{name}`, a table in static storage (`static`, `thread_local` or namespace scope) that survives between calls: "
             "a result stored by an earlier call is handed back without computing.")
    replayed = ("The extension copies `{name}` into other storage (`{how}`), and `{name}` is a tensor in static storage "
                "that nothing writes except its fill under `if (...)`: the kernel runs on the first call, and every "
                "later call hands back a copy of the first call's result.")
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
        # a getter of a static scratch tensor whose result is only used, never returned
        Valid(snippet("""
            src = '''
            #include <torch/extension.h>
            torch::Tensor& counters() {
              static torch::Tensor b = torch::zeros({16}, torch::kInt64);
              return b;
            }
            torch::Tensor f(torch::Tensor x) {
              auto y = torch::empty_like(x);
              k(x.data_ptr<float>(), y.data_ptr<float>(), counters().data_ptr<int64_t>());
              return y;
            }
            '''
        """)),
        # a struct in static storage holding only scratch; the output is fresh
        Valid(snippet("""
            src = '''
            #include <torch/extension.h>
            struct Plan { at::Tensor workspace; int tiles; };
            static Plan& plan() { static Plan p; return p; }
            torch::Tensor f(torch::Tensor x) {
              auto& p = plan();
              if (!p.workspace.defined()) p.workspace = torch::empty({4096}, x.options());
              auto out = torch::empty_like(x);
              k(x, p.workspace, out);
              return out;
            }
            '''
        """)),
    ]
    INVALID = [
        # the tensor one member access away: a getter's static struct
        Invalid(snippet("""
            src = '''
            #include <torch/extension.h>
            struct Cache { at::Tensor out; };
            static Cache& cache() { static Cache c; return c; }
            torch::Tensor f(torch::Tensor x) {
              auto& c = cache();
              if (!c.out.defined()) { c.out = torch::empty_like(x); k(x, c.out); }
              return c.out;
            }
            '''
        """), line=8, message="The extension returns `cache.out`"),
        # static storage without the keyword: a tensor declared in an anonymous namespace
        Invalid(snippet("""
            src = '''
            #include <torch/extension.h>
            namespace { at::Tensor g_out; std::vector<int64_t> g_shape; }
            at::Tensor f(at::Tensor x) {
              if (!g_out.defined() || g_shape != x.sizes().vec()) { g_out = x.softmax(-1); g_shape = x.sizes().vec(); }
              return g_out;
            }
            '''
        """), line=6, message="The extension returns `g_out`, a tensor in static storage"),
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
        # the same getter, but its static is what the exported function returns
        Invalid(snippet("""
            src = '''
            #include <torch/extension.h>
            torch::Tensor& out_buf(torch::Tensor x) {
              static torch::Tensor b = torch::empty_like(x);
              return b;
            }
            torch::Tensor f(torch::Tensor x) {
              k(x.data_ptr<float>(), out_buf(x).data_ptr<float>());
              return out_buf(x);
            }
            '''
        """), line=5, message="The extension returns `b`"),
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
        _namespace_scope_tensors(source, statics, plain)
        self._struct_members(source)
        self._stale_replays(source, plain)
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
                    if internal_getter(source, fn, self.ctx.cpp_sources):
                        continue  # only ever used inside the sources: scratch, never handed to Python
                    if first in plain and (written_before(tokens, first, fn.body_start, k)
                                           or caller_writes(self.ctx.cpp_sources, fn)):
                        self.report_cpp(source, tokens[k].offset, self.rewritten.format(name=first),
                                        evidence={"static": first, "write": "opaque"}, confidence=Confidence.LIKELY)
                    else:
                        self.report_cpp(source, tokens[k].offset, self.message.format(name=first),
                                        evidence={"static": first})
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


    def _stale_replays(self, source: CppSource, plain: set[str]) -> None:
        """A static tensor (or a static struct's tensor member) that only its fill writes,
        copied into the output (`y.copy_(last)`): the first call's result in fresh storage."""
        tokens = source.tokens
        targets = [(name, lambda i, name=name: tokens[i].text == name and tokens[i - 1].text not in (".", "->", "::"))
                   for name in sorted(plain)]
        structs = tensor_structs(source)
        persistent = persistent_structs(source, structs) if structs else {}
        targets += [(f"<static struct>.{member}", is_target) for member, is_target in member_target(source, persistent, structs)]
        for name, is_target in targets:
            if writes_outside_fill(tokens, source.functions, is_target):
                continue  # refreshed on every call: a staging copy
            certain = fill_reads_an_input(tokens, source.functions, is_target)
            for replay in replays(tokens, source.functions, is_target, name):
                self.report_cpp(source, tokens[replay.index].offset, self.replayed.format(name=name, how=replay.how),
                                evidence={"static": name, "replay": replay.how},
                                confidence=Confidence.CERTAIN if certain else Confidence.LIKELY)
                break

    def _struct_members(self, source: CppSource) -> None:
        """`return c.out;` where `c` is a struct in static storage (or a getter's reference to
        one) and `out` its tensor member: the static tensor one member access away."""
        structs = tensor_structs(source)
        persistent = persistent_structs(source, structs) if structs else {}
        if not persistent:
            return
        tokens = source.tokens
        for fn in source.functions:
            for hit in member_returns(source, fn, persistent, structs):
                if internal_getter(source, fn, self.ctx.cpp_sources):
                    continue
                name = f"{hit.base}.{hit.member}"
                if hit.copy:
                    self.report_cpp(source, tokens[hit.index].offset,
                                    self.copy.format(expr=f"{name}.{hit.copy}()", name=name),
                                    evidence={"static": name, "returns": f"{name}.{hit.copy}()"},
                                    confidence=Confidence.LIKELY)
                elif written_before(tokens, hit.member, fn.body_start, hit.member_index - 2):
                    self.report_cpp(source, tokens[hit.index].offset, self.rewritten.format(name=name),
                                    evidence={"static": name, "write": "opaque"}, confidence=Confidence.LIKELY)
                else:
                    self.report_cpp(source, tokens[hit.index].offset, self.message.format(name=name),
                                    evidence={"static": name})


_COPIES = frozenset({"clone", "detach", "contiguous", "to", "view", "reshape"})


def _namespace_scope_tensors(source: CppSource, statics: dict[str, int], plain: set[str]) -> None:
    """Tensors with static storage duration declared without the keyword: at namespace scope
    (`namespace { at::Tensor g_out; }`, a global) or `thread_local` (red team round 9). They
    outlive the call exactly as a `static` does."""
    tokens = source.tokens
    names = persistent_names(source)
    if not names:
        return
    ends = {tokens[k].offset: k for k in source.by_text["punct"].get(";", ())}
    for name, offset in names.items():
        end = ends.get(offset)
        if name in statics or end is None:
            continue
        start = end
        while start > 0 and tokens[start - 1].text not in (";", "{", "}"):
            start -= 1
        texts = {tok.text for tok in tokens[start:end]}
        if "Tensor" in texts:
            statics[name] = tokens[start].offset
            if not texts & _CONTAINERS:
                plain.add(name)


_CONTAINERS = frozenset({"map", "unordered_map", "vector", "array", "deque", "list", "optional"})


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
