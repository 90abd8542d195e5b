from __future__ import annotations

from typing import Optional

import libcst as cst

from gatekeeper.report import Category, Confidence, Severity
from gatekeeper.analyses.python_stream_exprs import (
    capture_stream_argument, creation_target, is_current_stream, is_stream_parameter, is_stream_reference,
    is_join, module_streams, stream_identity, wraps_current_stream,
)
from gatekeeper.analyses.stream_joins import (
    DEVICE_SYNC, JOIN_METHODS, STREAM_CTORS, STREAM_SWITCHES, Path, StreamFrame, StreamUse, branch_path,
    drop_capture_only, element_join_path, element_source, joined_collection, stream_verdicts,
)
from gatekeeper.static.syntax import argument, is_self_attr, self_attr
from gatekeeper.static.rule import Rule
from gatekeeper.static.examples import Invalid, Valid, snippet


_HANDLERS = ("visit_FunctionDef", "leave_FunctionDef", "visit_Call", "leave_Call", "visit_With", "leave_With",
             "visit_Return", "visit_Name", "visit_Attribute")


class SideStreamInPython(Rule):
    """Work is put on a CUDA stream other than the caller's current stream: a
    `torch.cuda.Stream()` (or `torch.Stream`, `ExternalStream`, a CuPy stream) is created, a
    `with torch.cuda.stream(s):` block or `torch.cuda.set_stream(s)` switches to it, or its
    handle (`s.cuda_stream`) is handed to an extension, and the function returns without
    joining it back.

    Why it games the benchmark: the harness's CUDA events and its output check are on the
    current stream; work left on a private (non-blocking) stream is invisible to both: the
    time is only the launch, and the result may still be written while it is compared.

    A side stream joined back before the return is at most a warning: `current_stream().wait_stream(s)`,
    an event recorded on it and waited for (`wait_event(e)`, `e.synchronize()`), `s.synchronize()`
    or `torch.cuda.synchronize()`, after the side-stream work. A join inside the `with` block does not
    count (there the current stream is the side stream itself). Using the current or default
    stream (`torch.cuda.current_stream()`, `torch.cuda.stream(torch.cuda.current_stream())`)
    is not flagged, nor a stream only in a type annotation, nor `with torch.cuda.stream(stream):`
    on a parameter: the caller's stream is judged where it is created.

    The join must be on every path from the side-stream work to the return: a join inside
    an `if` that the work is not also inside (`if self.calls % 100 == 0:
    torch.cuda.synchronize()`), inside a loop body or an `except` handler, or behind an
    early `return` does not count, since the steady-state call returns unjoined. A join in
    both arms of an `if`/`else` counts, and so does a join in the same branch as the work.
    A loop that joins each element of a collection (`for s in streams: cur.wait_stream(s)`,
    `for e in events: cur.wait_event(e)`) is not proven to join this stream: the finding is
    likely, not certain, and the run-time check GK640 settles it, unless the work ran on an
    element of that same local list (`s = streams[i]`, `for s in streams:`), neither rebound
    nor changed in place in the function: then the loop joins it.

    A getter that creates streams and stores or returns them (`_S = (Stream(), Stream())`,
    `self._streams.append(Stream())`, `return torch.cuda.Stream()`) runs nothing on them: when another function joins, the
    creation is not reported, and each function that switches to such a stream is judged by
    its own joins (unjoined: an error where it switches).
    """

    code = "GK500"
    name = "SideStreamInPython"
    category = Category.STREAM_ESCAPE
    severity = Severity.ERROR
    # Confirms a finding that is only likely (joined by a loop over streams or events): the
    # output still changing after the caller's stream was synchronised.
    confirmed_by = "GK640"
    summary = "launches work on a private CUDA stream that is not joined back to the current stream"
    message = (
        "{what} puts work on a CUDA stream other than the caller's current stream, and it is not "
        "joined back before {function} returns: the harness's events and synchronisation on the "
        "current stream do not wait for it, so the timing misses the work and the output may be "
        "read before it is written."
    )
    joined_message = (
        "{what} uses a CUDA stream other than the current one; it is joined back to the current stream "
        "before {function} returns, so the work is timed. A warning only: keep the join on every path "
        "out of the call (the timing stage's GK705 checks that no work runs on after it)."
    )
    loop_note = (
        " A loop joins the elements of a collection (`for s in streams: cur.wait_stream(s)`); whether "
        "that collection holds this stream is left to the run-time check."
    )
    hint = (
        "Launch everything on the caller's current stream: drop `torch.cuda.Stream()` / "
        "`with torch.cuda.stream(...)`, and in C++ launch on `at::cuda::getCurrentCUDAStream()`. If "
        "you need overlap, join the side stream before returning with "
        "`torch.cuda.current_stream().wait_stream(s)`."
    )
    VALID = [
        # a private stream only ever captured on; the graph replays on the current stream
        Valid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    s, g = torch.cuda.Stream(), torch.cuda.CUDAGraph()
                    with torch.cuda.graph(g, stream=s):
                        y = _ext.run(x)
                    g.replay()
                    return y.clone()
        """)),
        # a helper that runs on whatever stream its caller passes, called with the current one
        Valid(snippet("""
            import torch
            def run_on(stream, x):
                with torch.cuda.stream(stream):
                    return _ext.run(x)
            def forward(x):
                return run_on(torch.cuda.current_stream(), x)
        """)),
        # the current stream, by name and through a helper variable
        Valid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    s = torch.cuda.current_stream()
                    out = torch.empty_like(x)
                    _ext.run(x, out, s.cuda_stream)
                    return out
        """)),
        Valid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    with torch.cuda.stream(torch.cuda.current_stream()):
                        return _ext.run(x)
        """)),
        # a stream only in an annotation, and a local named Stream that is not torch's
        Valid(snippet("""
            import torch
            def launch(x: torch.Tensor, stream: 'torch.cuda.Stream' = None) -> torch.Tensor:
                return _ext.run(x)
            class Stream:
                pass
            def f():
                return Stream()
        """)),
    ]
    INVALID = [
        # captured on the private stream, then also replayed there and never joined
        Invalid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    s, g = torch.cuda.Stream(), torch.cuda.CUDAGraph()
                    with torch.cuda.graph(g, stream=s):
                        y = _ext.run(x)
                    with torch.cuda.stream(s):
                        g.replay()
                    return y
        """), line=7, message="other than the caller's current stream"),
        # the device's module, asked for by device: torch.cuda on the benchmark's GPU
        Invalid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    with torch.get_device_module(x.device).stream(torch.get_device_module(x.device).Stream()):
                        return _ext.run(x)
        """), line=4, message="side stream"),
        # joined by a helper of the file whose body waits for the stream it is handed: the
        # joined warning, not the error
        Invalid(snippet("""
            import torch
            def _join(side):
                torch.cuda.current_stream().wait_stream(side)
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    with torch.cuda.stream(self.side):
                        y = _ext.run(x)
                    _join(self.side)
                    return y
        """), line=6, message="it is joined back to the current stream before"),
        # the same getter, and the user never joins: the switch is reported where it happens
        Invalid(snippet("""
            import torch
            _S = None
            def _streams():
                global _S
                if _S is None:
                    _S = (torch.cuda.Stream(), torch.cuda.Stream())
                return _S
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    a, b = _streams()
                    with torch.cuda.stream(a):
                        _ext.run(x)
                    return x
        """), line=11, message="it is not joined back"),
        Invalid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.side = torch.cuda.Stream()
                def forward(self, x):
                    with torch.cuda.stream(self.side):
                        out = _ext.run(x)
                    return out
        """), line=5, message="Creating a side stream here"),
        # joined only on a rarely taken branch: the steady-state call returns unjoined
        Invalid(snippet("""
            import torch
            class ModelNew(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.side = torch.cuda.Stream()
                    self.calls = 0
                def forward(self, x):
                    with torch.cuda.stream(self.side):
                        out = _ext.run(x)
                    self.calls += 1
                    if self.calls % 100 == 0:
                        torch.cuda.current_stream().wait_stream(self.side)
                    return out
        """), line=5, message="Creating a side stream here"),
        # an early return skips the join
        Invalid(snippet("""
            import torch
            s = torch.cuda.Stream()
            def forward(x):
                with torch.cuda.stream(s):
                    y = _ext.run(x)
                if x.numel() < 4096:
                    return y
                torch.cuda.current_stream().wait_stream(s)
                return y
        """), line=2, message="Creating a side stream here"),
        # aliased import, stream handle handed to C++
        Invalid(snippet("""
            from torch.cuda import Stream as S
            _s = S(priority=-1)
            def forward(x):
                return _ext.run(x, _s.cuda_stream)
        """), line=2, message="Creating a side stream here"),
        # joined only inside the with block: there the current stream is the side stream
        Invalid(snippet("""
            import torch
            import torch.cuda as tc
            def forward(x):
                s = tc.Stream()
                with tc.stream(s):
                    y = _ext.run(x)
                    tc.current_stream().wait_stream(s)
                return y
        """), line=4, message="Creating a side stream here"),
        Invalid(snippet("""
            import torch
            def forward(x):
                torch.cuda.set_stream(torch.cuda.Stream())
                return _ext.run(x)
        """), line=3, message="switching the current stream"),
        # the same helper, called with a private stream
        Invalid(snippet("""
            import torch
            def run_on(stream, x):
                with torch.cuda.stream(stream):
                    return _ext.run(x)
            def forward(x):
                return run_on(torch.cuda.Stream(), x)
        """), line=6, message="Creating a side stream here"),
    ]

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.seq = 0
        self.frames: list[StreamFrame] = [StreamFrame("<module>")]
        self.done: list[StreamFrame] = []
        self.stream_attrs: set[str] = set()
        # every stream it judges is named `...Stream...`/`...stream...`: a file without it has none
        streamless = "tream" not in self.ctx.text
        if streamless:
            self.switch_off_inherited(SideStreamInPython, _HANDLERS)
        self.module_streams: set[str] = set() if streamless else module_streams(self.ctx)
        # every name that may hold a stream somewhere: visit_Name leaves at once for the rest
        self.watch: set[str] = set(self.module_streams)
        self.with_uses: dict[int, list[StreamUse]] = {}
        self.join_depth = 0
        self.join_calls: set[int] = set()
        # calls of the file's own functions: (caller frame, seq, path, callee key, call), for
        # helpers that join (`_join(s)` whose body waits for its argument), settled in finish
        self.helper_calls: list[tuple[StreamFrame, int, Path, str, cst.Call]] = []
        self.captured: set[str] = set()  # streams passed as a graph capture's `stream=`

    # helpers -------------------------------------------------------------------------
    def _tick(self) -> int:
        self.seq += 1
        return self.seq

    def _stream_identity(self, expr: cst.BaseExpression) -> Optional[str]:
        """The name of a stream variable or attribute this expression refers to."""
        return stream_identity(self.ctx, expr, self.frames[-1].local_streams, self.module_streams, self.stream_attrs)

    def _add_use(self, node: cst.CSTNode, kind: str, identity: Optional[str] = None) -> StreamUse:
        use = StreamUse(node, self._tick(), kind, identity, branch_path(self.ctx, node))
        self.frames[-1].uses.append(use)
        return use

    # traversal -----------------------------------------------------------------------
    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.frames.append(StreamFrame(self.ctx.function_key))

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        if len(self.frames) > 1:
            self.done.append(self.frames.pop())

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if type(func) is cst.Attribute and func.attr.value in JOIN_METHODS:
            if is_join(self.ctx, func, self._stream_identity(func.value) is not None):
                seq, path = self._tick(), branch_path(self.ctx, node)
                self.frames[-1].joins.append((seq, path))
                joined = func.value if func.attr.value == "synchronize" else argument(node, 0, "stream")
                loop_path = element_join_path(self.ctx, node, joined, path)
                if loop_path is not None:
                    self.frames[-1].loop_joins.append((seq, loop_path))
                    key = joined_collection(self.ctx, node, joined)
                    if key is not None:
                        self.frames[-1].element_joins.append((seq, loop_path, key))
                self.join_depth += 1
                self.join_calls.add(id(node))
                return
        callee = func.value if type(func) is cst.Name else (
            f"{self.ctx.class_name}.{func.attr.value}" if is_self_attr(func) and self.ctx.class_name else None)
        if callee is not None and len(self.frames) > 1:
            self.helper_calls.append((self.frames[-1], self._tick(), branch_path(self.ctx, node), callee, node))
        qual = self.ctx.qualname(func)
        if qual is None:
            return
        if qual in DEVICE_SYNC:
            self.frames[-1].joins.append((self._tick(), branch_path(self.ctx, node)))
        elif qual in STREAM_CTORS and not wraps_current_stream(self.ctx, node):
            identity = creation_target(self.ctx, node)
            self._add_use(node, "create", identity)
            if identity is not None:
                if identity.startswith("self."):
                    self.stream_attrs.add(identity[5:])
                else:
                    self.frames[-1].local_streams.add(identity)
                    self.watch.add(identity)
        elif qual in STREAM_SWITCHES:
            target = argument(node, 0, "stream")
            if not is_current_stream(self.ctx, target) and not is_stream_parameter(self.ctx, target):
                use = StreamUse(node, 0, "switch", self._stream_identity(target) if target is not None else None,
                                element_of=element_source(self.ctx, node, target))
                parent = self.ctx.parent(node)
                with_node = self.ctx.parent(parent) if (type(parent) is cst.WithItem) else None
                if type(with_node) is cst.With:
                    self.with_uses.setdefault(id(with_node), []).append(use)
                else:
                    use.seq = self._tick()
                    use.path = branch_path(self.ctx, node)
                    self.frames[-1].uses.append(use)

    def leave_Call(self, node: cst.Call) -> None:
        if id(node) in self.join_calls:
            self.join_depth -= 1

    def visit_With(self, node: cst.With) -> None:
        # `with s:` / `with torch.cuda.Stream() as s:` switch streams too (CuPy, torch.Stream)
        for item in node.items:
            identity = self._stream_identity(item.item)
            if identity is not None:
                self.with_uses.setdefault(id(node), []).append(StreamUse(item.item, 0, "switch", identity))
            elif type(item.item) is cst.Call and self.ctx.qualname(item.item.func) in STREAM_CTORS \
                    and not wraps_current_stream(self.ctx, item.item):
                self.with_uses.setdefault(id(node), []).append(StreamUse(item.item, 0, "switch", None))

    def leave_With(self, node: cst.With) -> None:
        for use in self.with_uses.pop(id(node), []):
            use.seq = self._tick()  # joins count only after the block has ended
            use.path = branch_path(self.ctx, node)
            self.frames[-1].uses.append(use)

    def visit_Return(self, node: cst.Return) -> None:
        if len(self.frames) > 1:
            self.frames[-1].returns.append((self._tick(), branch_path(self.ctx, node)))

    def visit_Name(self, node: cst.Name) -> None:
        if node.value not in self.watch:
            return
        if self.join_depth == 0 and (node.value in self.frames[-1].local_streams or node.value in self.module_streams):
            if is_stream_reference(self.ctx, node):
                identity = self._stream_identity(node)
                if identity is not None:
                    self._reference(node, identity)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        key = self_attr(node)
        if self.join_depth == 0 and node.attr.value in self.stream_attrs and key is not None \
                and is_stream_reference(self.ctx, node):
            self._reference(node, key)

    def _reference(self, node: cst.CSTNode, identity: str) -> None:
        # `torch.cuda.graph(g, stream=s)` captures on `s`: capture records a graph and runs
        # nothing, and the graph is judged where it is replayed (as GK501 does for C++ capture).
        if capture_stream_argument(self.ctx, node):
            self.captured.add(identity)
        else:
            self._add_use(node, "ref", identity)

    # verdicts -------------------------------------------------------------------------
    def finish(self) -> None:
        frames = drop_capture_only(self.done + self.frames, self.captured)
        for use, where, bad, what, maybe in stream_verdicts(self.ctx, frames, self.helper_calls):
            self._emit(use, where, bad, what, maybe)

    def _emit(self, use: StreamUse, function: str, bad: bool, what: str, maybe: bool = False) -> None:
        if bad and maybe:
            # joined only by a loop over a collection of streams or events, which this rule does
            # not prove holds this stream: likely, left to the run-time check (GK640)
            self.report(use.node, self.message.format(what=what, function=function) + self.loop_note,
                        evidence={"stream": use.identity, "function": function, "joined": "by a loop"},
                        confidence=Confidence.LIKELY)
        elif bad:
            self.report(use.node, self.message.format(what=what, function=function),
                        evidence={"stream": use.identity, "function": function, "joined": False})
        else:
            self.report(use.node, self.joined_message.format(what=what, function=function),
                        evidence={"stream": use.identity, "function": function, "joined": True},
                        severity=Severity.WARNING if self.active_severity == Severity.ERROR else self.active_severity)
