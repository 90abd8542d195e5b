"""The GK500 analysis of Python streams: which calls create, switch to or join a CUDA stream,
and whether a join covers a use on every path through the function (branch paths).

A rule-sized analysis kept out of the rule file so the rule holds its policy, messages and
examples; nothing here knows about findings."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import libcst as cst

STREAM_CTORS = frozenset({
    "torch.cuda.Stream", "torch.cuda.streams.Stream", "torch.Stream", "torch.cuda.ExternalStream",
    "torch.cuda.streams.ExternalStream", "cupy.cuda.Stream", "cupy.cuda.ExternalStream",
})
STREAM_SWITCHES = frozenset({
    "torch.cuda.stream", "torch.cuda.set_stream", "torch.cuda.StreamContext",
    "torch.cuda.streams.StreamContext", "torch.accelerator.set_stream", "torch.cuda.utils.stream",
})
CURRENT_STREAM = frozenset({
    "torch.cuda.current_stream", "torch.cuda.default_stream", "torch.accelerator.current_stream",
    "torch.cuda.streams.current_stream",
})
JOIN_METHODS = frozenset({"wait_stream", "wait_event", "synchronize"})
DEVICE_SYNC = frozenset({"torch.cuda.synchronize", "torch.accelerator.synchronize", "cupy.cuda.Device.synchronize"})


# A path is the tuple of branches that enclose a statement inside its function:
# (id of the if/loop/try/boolean node, which arm). A join covers a use when it comes later
# and every branch it sits in also encloses the use, with no return in between.
Path = tuple[tuple[int, str], ...]


@dataclass
class StreamUse:
    node: cst.CSTNode
    seq: int
    kind: str  # create | switch | ref
    identity: Optional[str] = None
    path: Path = ()
    # a switch to an element of a local collection (`s = streams[i]`, `for s in streams:`):
    # (collection name, id of its binding), matched against StreamFrame.element_joins
    element_of: Optional[tuple[str, int]] = None


@dataclass
class StreamFrame:
    key: str
    uses: list[StreamUse] = field(default_factory=list)
    joins: list[tuple[int, Path]] = field(default_factory=list)
    # Joins of each element of a collection (`for s in streams: cur.wait_stream(s)`), placed
    # where the loop stands: whether the collection holds the stream that did the work is not
    # read here, so they make an unjoined finding likely, never clear it.
    loop_joins: list[tuple[int, Path]] = field(default_factory=list)
    returns: list[tuple[int, Path]] = field(default_factory=list)
    # loop joins of every element of a named local collection, keyed as StreamUse.element_of:
    # a switch to an element of the same, unrebound collection is joined by them (certain)
    element_joins: list[tuple[int, Path, tuple[str, int]]] = field(default_factory=list)
    local_streams: set[str] = field(default_factory=set)
    merged: bool = False

    def joined_after(self, use: StreamUse, loops: bool = False) -> bool:
        """A join covers `use` on every path; with `loops`, a join of a collection's elements
        counts as well."""
        if not self.merged:
            self.joins = merge_branches(self.joins)
            self.merged = True
        own = [(seq, path) for seq, path, key in self.element_joins if key == use.element_of]
        for seq, path in (self.joins + self.loop_joins if loops else self.joins + own):
            if seq <= use.seq or path != use.path[:len(path)]:
                continue  # earlier, or on a branch the use's path need not take
            if any(use.seq < r < seq and compatible(rpath, use.path) for r, rpath in self.returns):
                continue  # a return between them leaves on a path without the join
            return True
        return False


def unjoined_streams(frames: list[StreamFrame]) -> tuple[set[str], set[str], set[str]]:
    """(identities used, those some function that uses them leaves unjoined, those left
    unjoined even counting the joins of a collection's elements: StreamFrame.loop_joins)."""
    used: set[str] = set()
    unjoined: set[str] = set()
    unjoined_loops: set[str] = set()
    for frame in frames:
        for use in frame.uses:
            if use.kind == "create" or use.identity is None:
                continue
            used.add(use.identity)
            if not frame.joined_after(use):
                unjoined.add(use.identity)
                if not frame.joined_after(use, loops=True):
                    unjoined_loops.add(use.identity)
    return used, unjoined, unjoined_loops


def join_by_helpers(frames: list[StreamFrame], calls: list[tuple[StreamFrame, int, Path, str, cst.Call]]) -> set[int]:
    """A call of a function of the file that joins on every path through it (a join at its top
    level, before any return) joins where it is called (`_join(s)`): added to the caller's
    joins. `calls`: (caller frame, seq, path, callee key, call). Returns the ids of those calls."""
    def top_level(joins: list[tuple[int, Path]], f: StreamFrame) -> bool:
        return any(not path and not any(r < seq for r, _ in f.returns) for seq, path in joins)

    joining = {f.key for f in frames if f.key != "<module>" and top_level(f.joins, f)}
    # a helper that joins each element of a collection it is handed joins as a loop does: likely
    looping = {f.key for f in frames if f.key != "<module>" and top_level(f.loop_joins, f)} - joining
    out: set[int] = set()
    for frame, seq, path, callee, call in calls:
        if frame.key == callee or callee not in joining | looping:
            continue
        if callee in joining:
            frame.joins.append((seq, path))
            frame.merged = False
        else:
            frame.loop_joins.append((seq, path))
        out.add(id(call))
    return out


def compatible(a: Path, b: Path) -> bool:
    n = min(len(a), len(b))
    return a[:n] == b[:n]


def merge_branches(joins: list[tuple[int, Path]]) -> list[tuple[int, Path]]:
    """An `if` whose body and `else` both join (directly in each arm) joins on every path."""
    out = list(joins)
    while True:
        arms: dict[tuple[Path, int], dict[str, int]] = {}
        for seq, path in out:
            if path and path[-1][1] in ("body", "else"):
                arm = arms.setdefault((path[:-1], path[-1][0]), {})
                arm[path[-1][1]] = max(seq, arm.get(path[-1][1], 0))
        added = [(max(a.values()), outer) for (outer, _), a in arms.items()
                 if len(a) == 2 and (max(a.values()), outer) not in out]
        if not added:
            return out
        out.extend(added)


def branch_path(ctx, node: cst.CSTNode) -> Path:
    """The branches enclosing `node` inside its function (outermost first)."""
    path: list[tuple[int, str]] = []
    child = node
    for anc in ctx.ancestors(node):
        if type(anc) in (cst.FunctionDef, cst.ClassDef, cst.Lambda):
            break
        if type(anc) in (cst.If, cst.IfExp):
            if child is anc.orelse:
                path.append((id(anc), "else"))
            elif child is anc.body:
                path.append((id(anc), "body"))
        elif type(anc) in (cst.For, cst.While):
            if child is anc.body or child is anc.orelse:
                path.append((id(anc), "loop"))  # may run zero times
        elif type(anc) is cst.Try:
            if child is not anc.body and child is not anc.finalbody:
                path.append((id(anc), f"handler{id(child)}"))
        elif type(anc) is cst.BooleanOperation and child is anc.right:
            path.append((id(anc), "right"))  # `ok and s.synchronize()`
        child = anc
    return tuple(reversed(path))


def element_join_path(ctx, node: cst.Call, joined: Optional[cst.BaseExpression], path: Path) -> Optional[Path]:
    """For a join of `joined` inside `for NAME in COLLECTION:` whose NAME is `joined` (the
    innermost loop that encloses the join), the path of the loop itself; else None."""
    if type(joined) is not cst.Name or not path or path[-1][1] != "loop":
        return None
    loop = next((anc for anc in ctx.ancestors(node) if type(anc) in (cst.For, cst.While)), None)
    if type(loop) is not cst.For or id(loop) != path[-1][0]:
        return None
    if type(loop.iter) in (cst.List, cst.Tuple, cst.Set) and not loop.iter.elements:
        return None  # `for s in []:` joins nothing
    names = [loop.target] if type(loop.target) is cst.Name else [
        e.value for e in getattr(loop.target, "elements", ()) if type(e.value) is cst.Name]
    return path[:-1] if any(n.value == joined.value for n in names) else None


def collection_key(ctx, coll: Optional[cst.BaseExpression]) -> Optional[tuple[str, int]]:
    """A local collection named at this point of the walk: (name, id of its current binding),
    so two mentions share a key only when no assignment rebinds the name between them."""
    if type(coll) is not cst.Name:
        return None
    binding = ctx.resolver.lookup(coll.value)
    return (coll.value, id(binding)) if binding is not None and binding.kind == "local" else None


def element_source(ctx, node: cst.CSTNode, target: Optional[cst.BaseExpression]) -> Optional[tuple[str, int]]:
    """The collection whose element a stream switch targets: `s` bound to `streams[i]`, or the
    variable of an enclosing `for s in streams:` loop (StreamUse.element_of)."""
    if type(target) is cst.Subscript:
        return collection_key(ctx, target.value)
    if type(target) is not cst.Name:
        return None
    for anc in ctx.ancestors(node):
        if type(anc) is cst.For and type(anc.target) is cst.Name and anc.target.value == target.value:
            return collection_key(ctx, anc.iter)
        if type(anc) in (cst.FunctionDef, cst.ClassDef, cst.Lambda):
            break
    binding = ctx.resolver.lookup(target.value)
    value = binding.value if binding is not None and binding.kind == "local" else None
    return collection_key(ctx, value.value) if type(value) is cst.Subscript else None


def joined_collection(ctx, node: cst.Call, joined: Optional[cst.BaseExpression]) -> Optional[tuple[str, int]]:
    """`for s in streams: cur.wait_stream(s)`: the key of `streams` (see collection_key)."""
    if type(joined) is not cst.Name:
        return None
    loop = next((anc for anc in ctx.ancestors(node) if type(anc) in (cst.For, cst.While)), None)
    if type(loop) is not cst.For or type(loop.target) is not cst.Name or loop.target.value != joined.value:
        return None
    key = collection_key(ctx, loop.iter)
    return None if key is None or _mutated(ctx, node, key[0]) else key


_MUTATORS = frozenset({"clear", "pop", "remove", "insert", "append", "extend", "reverse", "sort", "__setitem__",
                       "__delitem__", "popleft", "rotate"})


class _Mutations(cst.CSTVisitor):
    """Whether a function changes a list in place (`name.pop()`, `name[i] = s`, `del name[i]`,
    `name += ...`): then a loop over it need not visit the element an earlier switch took."""

    def __init__(self, name: str) -> None:
        self.name, self.found = name, False

    def _is_name(self, expr: cst.BaseExpression) -> bool:
        return type(expr) is cst.Name and expr.value == self.name

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if type(func) is cst.Attribute and self._is_name(func.value) and func.attr.value in _MUTATORS:
            self.found = True

    def _mark(self, target: cst.BaseExpression) -> None:
        if self._is_name(target) or (type(target) is cst.Subscript and self._is_name(target.value)):
            self.found = True

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        if type(node.target) is cst.Subscript:  # a rebinding of the name changes the key anyway
            self._mark(node.target)

    def visit_Del(self, node: cst.Del) -> None:
        self._mark(node.target)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._mark(node.target)


def _mutated(ctx, node: cst.CSTNode, name: str) -> bool:
    func = next((a for a in ctx.ancestors(node) if type(a) is cst.FunctionDef), None)
    if func is None:
        return True  # module level: not judged, the loop stays a likely join
    finder = _Mutations(name)
    func.body.visit(finder)
    return finder.found


def kept_or_returned(ctx, node: cst.CSTNode) -> bool:
    """A new stream is kept or handed back (`_S = (Stream(), Stream())`, `return Stream()`),
    not used where it is made: a getter, whose callers do the work and the joining."""
    parent = ctx.parent(node)
    if type(parent) is cst.Element:
        parent = ctx.parent(ctx.parent(parent))  # Element -> Tuple/List -> holder
    elif type(parent) in (cst.ListComp, cst.GeneratorExp) and parent.elt is node:
        parent = ctx.parent(parent)  # `[Stream() for _ in range(n)]`: the list is the holder
    elif type(parent) is cst.Arg and not parent.star:
        # `self._streams.append(Stream())`: stored into a container, nothing runs on it here
        call = ctx.parent(parent)
        return type(call) is cst.Call and type(call.func) is cst.Attribute \
            and call.func.attr.value in _STORE_METHODS and type(ctx.parent(call)) is cst.Expr
    return type(parent) in (cst.Assign, cst.AnnAssign, cst.Return)


# container methods that keep their argument (a list, deque, set or dict of streams)
_STORE_METHODS = frozenset({"append", "appendleft", "insert", "add", "setdefault"})


def has_switch(frame: StreamFrame, identity: Optional[str]) -> bool:
    return any(u.kind == "switch" and u.identity == identity for u in frame.uses)


def drop_capture_only(frames: list[StreamFrame], captured: set[str]) -> list[StreamFrame]:
    """`frames` without the creation of a stream that is only ever a graph capture's stream
    (`torch.cuda.graph(g, stream=s)`): nothing runs on it."""
    if captured:
        used = {u.identity for f in frames for u in f.uses if u.kind != "create"}
        for frame in frames:
            frame.uses = [u for u in frame.uses
                          if not (u.kind == "create" and u.identity in captured and u.identity not in used)]
    return frames


def stream_verdicts(ctx, frames: list[StreamFrame], helper_calls: list[tuple[StreamFrame, int, Path, str, cst.Call]]
                    ) -> list[tuple[StreamUse, str, bool, str, bool]]:
    """GK500's verdict on every stream use after the walk: (use, the function named in the
    message, unjoined, what the use is in words, joined only by a loop or a looping helper)."""
    out: list[tuple[StreamUse, str, bool, str, bool]] = []
    helper_joins = join_by_helpers(frames, helper_calls)
    if helper_joins:  # the stream handed to a joining helper is joined there, not used
        for frame in frames:
            frame.uses = [u for u in frame.uses if u.kind != "ref" or not any(
                id(a) in helper_joins for a in ctx.ancestors(u.node))]
    used, unjoined, unjoined_loops = unjoined_streams(frames)
    for frame in frames:
        reported_ref: set[str] = set()
        for use in frame.uses:
            joined = frame.joined_after(use)
            maybe = not joined and frame.joined_after(use, loops=True)
            if use.kind == "create":
                if use.identity is None:
                    # a getter that stores or returns new streams runs nothing on them: the
                    # functions that use them join them (or are reported where they switch)
                    if not joined and kept_or_returned(ctx, use.node) and any(
                            f.joins or f.loop_joins for f in frames if f is not frame):
                        continue
                    bad = not joined
                elif use.identity in used:
                    bad = use.identity in unjoined
                    maybe = bad and use.identity not in unjoined_loops
                else:
                    # created, kept under a name and never used: nothing runs on it
                    bad = use.identity is None and not joined
                where = "each function that uses it" if use.identity in used else f"`{frame.key}`"
                out.append((use, where, bad, "Creating a side stream here", maybe))
            elif use.kind == "switch":
                what = f"`with`/`set_stream` on `{use.identity}`" if use.identity else "switching the current stream"
                out.append((use, f"`{frame.key}`", not joined, what, maybe))
            elif not joined and use.identity not in reported_ref and not has_switch(frame, use.identity):
                reported_ref.add(use.identity or "")
                out.append((use, f"`{frame.key}`", True, f"Using the side stream `{use.identity}`", maybe))
    return out
