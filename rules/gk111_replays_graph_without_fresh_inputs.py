from __future__ import annotations

from typing import Optional

import libcst as cst

from gatekeeper.report import Category, Severity
from gatekeeper.analyses.graph_inputs import (
    content_roots, empty_subscript, fresh_inputs, hands_inputs_to_helper, helper_summary, is_slice_write,
)
from gatekeeper.static.rule import Rule
from gatekeeper.static.walk import subtree
from gatekeeper.static.examples import Invalid, Valid, snippet


class ReplaysGraphWithoutFreshInputs(Rule):
    """`forward` replays a captured CUDA graph (`g.replay()`) without first copying its
    arguments into the graph's static input buffers (`self.static_x.copy_(x)`).

    Why it games the benchmark: the graph recomputes from the inputs it was captured with,
    so every call returns the result for the first input while looking like real work to a
    timer. Replaying after copying fresh inputs in is legitimate and not flagged (the
    behaviour stage still checks the results).

    Known false-positive patterns it does not fire on, and why:
    - the copy comes from a local derived from an input (`x_in = x.contiguous()`,
      `self.static_x.copy_(x_in)`): locals computed from the inputs count as inputs;
    - a graph captured on the caller's own buffers and keyed on their `data_ptr()`
      (re-captured when the pointer changes): replay re-reads the live input, so it
      recomputes; returning its static output is at most GK101 (output storage reused);
    - a graph replayed only when the very input object it was captured on comes back (`if x
      is self.seen: self.graph.replay()`), where the capture launches on the function's own
      parameters (not on a copy): every replay reads the live input.
    """

    code = "GK111"
    name = "ReplaysGraphWithoutFreshInputs"
    category = Category.CACHED_OUTPUT
    severity = Severity.ERROR
    summary = "replays a CUDA graph without copying the call's inputs into it"
    message = "forward replays a captured CUDA graph but never copies its inputs ({params}) into the graph's input buffers: it returns results for the captured inputs."
    hint = "Before `graph.replay()`, copy every input into the static buffers the graph was captured on (`self.static_x.copy_(x)`), and return a fresh copy of the static output."

    VALID = [
        Valid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    self.static_x.copy_(x)
                    self.graph.replay()
                    return self.static_y.clone()
        """)),
        Valid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    x_in = x if x.is_contiguous() else x.contiguous()
                    self.static_x.copy_(x_in)
                    self.graph.replay()
                    return self.static_y.clone()
        """)),
        Valid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    if self._ptr != x.data_ptr():
                        self._capture(x)
                        self._ptr = x.data_ptr()
                    self.graph.replay()
                    return self.static_y.clone()
        """)),
        # replayed only when the very input object it was captured on comes back
        Valid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    if self.graph is not None and x is self.seen:
                        self.graph.replay()
                        return self.out
                    self.out, self.graph, self.seen = torch.empty_like(x), torch.cuda.CUDAGraph(), x
                    with torch.cuda.graph(self.graph):
                        kernel[(1,)](x, self.out)
                    self.graph.replay()
                    return self.out
        """)),
        # the inputs copied in a loop, and a pointer key built by a generator over them
        Valid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x, y):
                    g, ins, out = self.plans[(tuple(x.shape), tuple(y.shape))]
                    for dst, src in zip(ins, (x, y)):
                        dst.copy_(src)
                    g.replay()
                    return out.clone()
        """)),
        # copied in by slice assignment, and by a helper of the file that copies what it is handed
        Valid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def _stage(self, dst, src):
                    dst.copy_(src, non_blocking=True)
                def forward(self, x, y):
                    g, sx, sy, out = self.plans[(tuple(x.shape), tuple(y.shape))]
                    sx[...] = x
                    self._stage(sy, y)
                    g.replay()
                    return out.clone()
        """)),
        Valid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, *args):
                    key = tuple((tuple(a.shape), a.data_ptr()) for a in args)
                    graph, out = self.graphs[key]
                    graph.replay()
                    return out.clone()
        """)),
        # replayed only when the very objects it was captured on come back, tested in a generator
        # over the stored and the given inputs, or in a helper of the file (round 7, 2026-12-06)
        Valid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def _same(self, x, r):
                    return self.seen is not None and x is self.seen[0] and r is self.seen[1]
                def forward(self, x, r):
                    if self.graph is not None and all(a is b for a, b in zip(self.seen, (x, r))):
                        self.graph.replay()
                        return self.out
                    if self.graph is not None and self._same(x, r):
                        self.graph.replay()
                        return self.out
                    self.out, self.seen = torch.empty_like(x), (x, r)
                    self.graph = torch.cuda.CUDAGraph()
                    with torch.cuda.graph(self.graph):
                        kernel[(1,)](x, r, self.out)
                    self.graph.replay()
                    return self.out
        """)),
    ]
    INVALID = [
        # buffers made like the input and stored under its shape: nothing copies the input in
        Invalid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    key = tuple(x.shape)
                    if key not in self.graphs:
                        sx, out, g = torch.empty_like(x), torch.empty_like(x), torch.cuda.CUDAGraph()
                        self.graphs[key] = (g, sx, out)
                    g, sx, out = self.graphs[key]
                    g.replay()
                    return out.clone()
        """), line=9, message="never copies its inputs (x)"),
        # a helper that copies, but not what it is handed
        Invalid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def _stage(self, dst, src):
                    dst.copy_(self.first[tuple(src.shape)])
                def forward(self, x):
                    self._stage(self.static_x, x)
                    self.graph.replay()
                    return self.static_y.clone()
        """), line=7, message="never copies its inputs (x)"),
        # what is copied in was looked up by the inputs' shape: no input's contents reach the graph
        Invalid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    key = (tuple(x.shape), x.dtype)
                    self.static_x.copy_(self.first_inputs[key])
                    self.graph.replay()
                    return self.static_y.clone()
        """), line=6, message="never copies its inputs (x)"),
        Invalid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    if self.graph is None:
                        self.capture(x)
                    self.graph.replay()
                    return self.static_y
        """), line=6, message="forward replays a captured CUDA graph but never copies its inputs (x) into the graph's input buffers"),
        Invalid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, a, b):
                    g = self._g
                    g.replay()
                    return self._out.clone()
        """), line=5, message="forward replays a captured CUDA graph but never copies its inputs (a, b) into the graph's input"),
        # keyed on the input object, but captured on a copy of it: an in-place change is never seen
        Invalid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    if self.graph is not None and x is self.seen:
                        self.graph.replay()
                        return self.out
                    self.sx, self.out, self.seen = x.clone(), torch.empty_like(x), x
                    self.graph = torch.cuda.CUDAGraph()
                    with torch.cuda.graph(self.graph):
                        kernel[(1,)](self.sx, self.out)
                    self.graph.replay()
                    return self.out
        """), line=5, message="never copies its inputs (x)"),
        # `x is not None` tests no identity: any new input replays the graph of the first one
        Invalid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    if self.graph is not None and x is not None:
                        self.graph.replay()
                        return self.out
                    self.out = torch.empty_like(x)
                    self.graph = torch.cuda.CUDAGraph()
                    with torch.cuda.graph(self.graph):
                        kernel[(1,)](x, self.out)
                    self.graph.replay()
                    return self.out
        """), line=5, message="never copies its inputs (x)"),
    ]

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.frames: list[dict] = []
        self.pending: list[tuple[cst.Call, str]] = []  # replays without a fresh input, decided in finish
        self.live_capture = False  # some graph capture launches on a function parameter itself
        self.helpers: dict[str, tuple[list[str], Optional[str], set[str]]] = {}  # see graph_inputs.helper_summary
        self.identity_helpers: dict[str, list[int]] = {}  # a function of the file -> its positional params tested by `is`
        if "replay" not in self.ctx.text:  # no `.replay()` to judge: the handlers are not called for this file
            self.switch_off_inherited(ReplaysGraphWithoutFreshInputs, _HANDLERS)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        ps = node.params
        every = [*ps.posonly_params, *ps.params, *ps.kwonly_params]
        every += [p for p in (ps.star_arg, ps.star_kwarg) if isinstance(p, cst.Param)]
        params = [p.name.value for p in every if p.name.value != "self"]
        positional = [p.name.value for p in (*ps.posonly_params, *ps.params) if p.name.value != "self"]
        star = ps.star_arg.name.value if isinstance(ps.star_arg, cst.Param) else None
        self.frames.append({"params": set(params), "sources": [], "ptrs": [], "ids": set(), "replays": [],
                            "assigns": [], "calls": [], "positional": positional, "star": star,
                            "capture_ifs": set(), "source_ifs": {}})

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        frame = self.frames.pop()
        if frame["sources"] or frame["ptrs"]:  # a helper that copies or keys on what it is handed
            self.helpers[node.name.value] = helper_summary(frame)
        if frame["ids"]:
            frame["ids"] = _identity_roots(frame)
            keyed = [i for i, name in enumerate(frame["positional"]) if name in frame["ids"]]
            if keyed:  # `def _same(self, x, r): return x is self.seen[0] and ...`: an identity test helper
                self.identity_helpers[node.name.value] = keyed
        if node.name.value != "forward" or not frame["replays"]:
            return
        _drop_capture_only_copies(self.ctx, frame)
        inputs = fresh_inputs(frame)
        # a graph keyed on the live input's address replays on it: it recomputes
        if any(not content_roots(expr).isdisjoint(inputs) for expr in (*frame["sources"], *frame["ptrs"])):
            return
        params = ", ".join(sorted(frame["params"])) or "none"
        for replay in frame["replays"]:
            # helpers may be defined after forward: their calls are judged in finish
            self.pending.append((replay, params if not frame["ids"] & frame["params"] else "is:" + params,
                                 frame["calls"], inputs, frame["params"]))

    def visit_With(self, node: cst.With) -> None:
        if self.frames and any(type(i.item) is cst.Call and self.ctx.qualname(i.item.func) == "torch.cuda.graph"
                               for i in node.items):
            self.frames[-1]["capture_ifs"].update(_enclosing_ifs(self.ctx, node))
        if self.live_capture or not self.frames:
            return
        if any(type(i.item) is cst.Call and self.ctx.qualname(i.item.func) == "torch.cuda.graph" for i in node.items):
            params = self.frames[-1]["params"]
            for sub in subtree(node.body, into_functions=False):
                if type(sub) is cst.Call and any(type(a.value) is cst.Name and a.value.value in params for a in sub.args):
                    self.live_capture = True
                    return

    def visit_Comparison(self, node: cst.Comparison) -> None:
        if self.frames and any(type(c.operator) in (cst.Is, cst.IsNot) for c in node.comparisons):
            sides = [node.left, *(c.comparator for c in node.comparisons)]
            if any(type(n) is cst.Name and n.value == "None" for n in sides):
                return  # `x is None` keys on nothing: any new input passes it
            self.frames[-1]["ids"].update(n.value for n in sides if type(n) is cst.Name)

    def _identity_helper_call(self, calls: list, params: set[str]) -> bool:
        """Forward hands its own parameters to a helper of the file at the positions that helper
        tests by identity (`if self._same(x, r): g.replay()`)."""
        for name, call in calls:
            keyed = self.identity_helpers.get(name)
            if keyed and any(i < len(call.args) and call.args[i].keyword is None and call.args[i].star == ""
                             and type(call.args[i].value) is cst.Name and call.args[i].value.value in params
                             for i in keyed):
                return True
        return False

    def finish(self) -> None:
        for replay, params, calls, inputs, names in self.pending:
            if any(hands_inputs_to_helper(call, self.helpers.get(name), inputs) for name, call in calls):
                continue  # `self._stage(self.sx, x)`, `key = _signature(x)`: a helper copies or keys on them
            if not params.startswith("is:") and self._identity_helper_call(calls, names):
                params = "is:" + params
            if params.startswith("is:"):
                if self.live_capture:
                    continue  # keyed on the very input object the graph was captured on
                params = params[3:]
            self.report(replay, self.message.format(params=params))

    def visit_Call(self, node: cst.Call) -> None:
        if not self.frames:
            return
        if type(node.func) is cst.Name:
            self.frames[-1]["calls"].append((node.func.value, node))  # a function of the file's own, maybe
            return
        if type(node.func) is not cst.Attribute:
            return
        frame = self.frames[-1]
        method = node.func.attr.value
        if type(node.func.value) is cst.Name and node.func.value.value == "self":
            frame["calls"].append((method, node))  # a method of the file's own: a helper, maybe
        if method == "replay" and not node.args:
            frame["replays"].append(node)
        # what the copied values are computed from; not `set_`, which points the tensor object at other
        # storage while the graph keeps reading the storage it captured (red team round 11)
        elif method in ("copy_", "index_copy_", "_foreach_copy_"):
            if not empty_subscript(node.func.value):  # `sx[:0].copy_(x[:0])` copies nothing
                copied = [a.value for a in node.args if not empty_subscript(a.value)]
                frame["sources"].extend(copied)
                for value in copied:
                    frame["source_ifs"][id(value)] = _enclosing_ifs(self.ctx, node)
        elif method == "data_ptr":  # `x.data_ptr()`, `a.data_ptr()` for a in the inputs, `x.contiguous().data_ptr()`
            frame["ptrs"].append(node.func.value)

    # Every way a local is bound, worked out at the end, only for a forward that replays:
    # assignments (unpacking too), loop and comprehension targets, walrus and `with ... as`.
    def _bind(self, target: cst.BaseExpression, value: cst.BaseExpression) -> None:
        if self.frames:  # read only for a forward that replays (leave_FunctionDef): most never do
            self.frames[-1]["assigns"].append((target, value))

    def visit_Assign(self, node: cst.Assign) -> None:
        for t in node.targets:
            if self.frames and is_slice_write(t.target):
                self.frames[-1]["sources"].append(node.value)  # `self.sx[...] = x`, `sx[:] = x`: a copy in
            self._bind(t.target, node.value)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None:
            self._bind(node.target, node.value)

    def visit_For(self, node: cst.For) -> None:
        self._bind(node.target, node.iter)

    def visit_CompFor(self, node: cst.CompFor) -> None:
        self._bind(node.target, node.iter)

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        self._bind(node.target, node.value)

    def visit_WithItem(self, node: cst.WithItem) -> None:
        if node.asname is not None:
            self._bind(node.asname.name, node.item)


def _identity_roots(frame: dict) -> set[str]:
    """The names compared by `is`, and what each was bound from, to a fixpoint: in
    `all(a is b for a, b in zip(self.seen, (x, r)))` the inputs x and r are what is compared."""
    ids = set(frame["ids"])
    for _ in range(4):  # bindings chain rarely deeper than this
        grown = set(ids)
        for target, value in frame["assigns"]:
            if any(type(n) is cst.Name and n.value in ids for n in subtree(target)):
                grown.update(n.value for n in subtree(value) if type(n) is cst.Name)
        if grown == ids:
            break
        ids = grown
    return ids


_HANDLERS = ("visit_FunctionDef", "leave_FunctionDef", "visit_With", "visit_Comparison", "visit_Call", "visit_Assign",
             "visit_AnnAssign", "visit_For", "visit_CompFor", "visit_NamedExpr", "visit_WithItem", "finish")


def _enclosing_ifs(ctx, node: cst.CSTNode) -> list[int]:  # type: ignore[no-untyped-def]
    """The ids of the `if` statements around a node, innermost first, up to its function."""
    out, current = [], ctx.parent(node)
    while current is not None and type(current) is not cst.FunctionDef:
        if type(current) is cst.If:
            out.append(id(current))
        current = ctx.parent(current)
    return out


def _drop_capture_only_copies(ctx, frame: dict) -> None:  # type: ignore[no-untyped-def]
    """A copy into the graph's input made only in the branch that captures it (`if entry is None:
    ...; sx.copy_(x); capture`) feeds the first replay only: a replay outside that branch reads
    the first call's input again (red team round 11)."""
    if not frame["capture_ifs"]:
        return
    replay_ifs = {i for replay in frame["replays"] for i in _enclosing_ifs(ctx, replay)}
    capture_only = frame["capture_ifs"] - replay_ifs
    frame["sources"] = [expr for expr in frame["sources"]
                        if capture_only.isdisjoint(frame["source_ifs"].get(id(expr), ()))]
