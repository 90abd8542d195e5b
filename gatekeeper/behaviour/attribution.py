"""Who did the work: a recorder that runs inside the submission worker around each checked call.

It records, without trusting names in the submission's source:
  - every ATen (or custom) operator dispatched during `forward`, with its time, through a
    TorchDispatchMode. Operators that C++ calls (`at::matmul` inside an extension) go through
    the dispatcher too, so they are seen, and marked as dispatched inside an own call;
  - every call of a function of the submission's own compiled modules (pybind functions of
    `.so` files outside the Python installation), through `sys.setprofile` C-call events:
    these fire however the function was reached (alias, computed getattr, stored reference);
  - on CUDA, the kernels launched (name, device time) from torch.profiler (CUPTI).
It decides nothing; `gatekeeper.behaviour.work` classifies and judges in the parent.
Checked calls only: the timing stage runs in another worker without any of this.
"""

from __future__ import annotations

import sys
import time
from typing import Any, Optional

from gatekeeper.behaviour.own_modules import own_modules
from gatekeeper.behaviour.result_prints import HeavyPrints
from gatekeeper.behaviour.custom_ops import run_custom

# Operators that allocate, view, move or fill memory: glue, not compute.
GLUE_PREFIXES = (
    "empty", "zeros", "ones", "full", "fill", "zero_", "new_", "view", "_unsafe_view", "reshape", "_reshape",
    "as_strided", "expand", "permute", "transpose", "t.", "t_", "contiguous", "clone", "copy", "_copy", "_to_copy",
    "to.", "detach", "alias", "lift", "slice", "select", "unsqueeze", "squeeze", "flatten", "unflatten", "split",
    "chunk", "narrow", "unbind", "_local_scalar_dense", "item", "is_", "size", "stride", "sym_", "resize",
    "set_", "_has_compatible", "random_", "normal_", "uniform_", "rand", "arange", "stack", "cat", "_unsafe",
    "equal", "numel", "dim", "result_type", "_conj", "_neg_view", "_fw_primal", "record_stream", "scalar_tensor",
)
TORCH_NAMESPACES = ("aten", "prims", "prim", "quantized", "_quantized", "inductor", "triton", "higher_order")


def is_glue(name: str) -> bool:
    short = name.split("::", 1)[-1]
    return short.startswith(GLUE_PREFIXES) or short in ("t", "to")


def _heavy(name: str) -> bool:
    from gatekeeper.behaviour.work import is_heavy_op

    return is_heavy_op(name)



class Recorder:
    """One checked call. Use as a context manager around `model(*inputs)`; on CUDA call
    `finish_device()` after the stream-escape digest."""

    def __init__(self, device: str) -> None:
        self.device = device
        self.own = own_modules()
        self.ops: dict[tuple[str, bool, bool], list[float]] = {}  # (name, inside own, glue) -> [count, seconds]
        self.own_calls: dict[str, list[float]] = {}  # qualified name -> [count, wall seconds]
        self.inner_s = 0.0  # time spent in the dispatch handler while inside own calls
        self.depth = 0
        self.entered = 0.0
        self.inner_mark = 0.0
        self.current = ""
        self.seq = 0
        self.writers: dict[int, tuple[int, str, bool, bool]] = {}  # storage ptr -> (seq, op, inside own, glue)
        self.last_own_end = -1
        self.kernels: list[tuple[str, float]] = []
        self.owned_kernels: list[dict[str, Any]] = []  # with their launcher's class, when CUPTI is ours
        self._owners: Any = None
        self.tampered: list[str] = []
        self._mode: Any = None
        self._profiler: Any = None
        self._hook: Any = None
        self._stack_len = 0
        self._custom: list[float] = []  # per custom operator running: seconds in its body's handlers
        self.prints = HeavyPrints()  # heavy ops' outputs, to tell a result torch computed (result_prints.py)

    # -- sys.setprofile: calls of own compiled functions -----------------------------------
    def _profile(self, frame: Any, event: str, arg: Any) -> None:
        if event == "c_call":
            module = getattr(arg, "__module__", None)
            if module in self.own:
                name = f"{module}.{getattr(arg, '__name__', '?')}"
                if self.depth == 0:
                    self.entered = time.perf_counter()
                    self.inner_mark = self.inner_s
                    self.current = name
                self.depth += 1
        elif event in ("c_return", "c_exception") and self.depth:
            module = getattr(arg, "__module__", None)
            if module in self.own:
                self.depth -= 1
                if self.depth == 0:
                    wall = time.perf_counter() - self.entered
                    entry = self.own_calls.setdefault(self.current, [0, 0.0, 0.0])
                    entry[0] += 1
                    entry[1] += wall
                    entry[2] += max(0.0, wall - (self.inner_s - self.inner_mark))
                    self.seq += 1
                    self.last_own_end = self.seq

    # -- the dispatch mode: every operator -------------------------------------------------
    def _dispatch(self, func: Any, args: tuple, kwargs: dict) -> Any:
        began = time.perf_counter()
        hook = sys.getprofile()
        sys.setprofile(None)  # the handler's own Python calls are not the submission's
        try:
            name = str(getattr(func, "name", lambda: str(func))())
            namespace = name.split("::", 1)[0] if "::" in name else "aten"
            inside = self.depth > 0 or bool(self._custom)
            glue = is_glue(name)
            seq0 = self.seq
            start = time.perf_counter()
            if namespace in TORCH_NAMESPACES:
                out = func(*args, **kwargs)
                spent = time.perf_counter() - start
            else:  # a custom operator registered by the submission: its body is recorded too
                out, python_body, inner = run_custom(self, func, args, kwargs, hook)
                # A Python body is interpreted, like forward: only what it calls is work. A
                # compiled body's own time is its time less the operators it dispatched.
                spent = 0.0 if python_body else max(0.0, time.perf_counter() - start - inner)
                name = "own-op:" + name
            entry = self.ops.setdefault((name, inside, glue), [0, 0.0])
            entry[0] += 1
            entry[1] += spent
            self._note_writes(out, name, inside, glue, since=seq0 if name.startswith("own-op:") else None)
            if not glue and not name.startswith("own-op:") and _heavy(name):
                self._fingerprint(name, out)
            return out
        finally:
            sys.setprofile(hook)
            elapsed = time.perf_counter() - began
            if self._custom:
                self._custom[-1] += elapsed  # inside a custom operator's body: not its own time
            elif self.depth > 0:
                self.inner_s += elapsed

    def _fingerprint(self, name: str, out: Any) -> None:
        """The sampled values of a heavy op's output; on CUDA the few kernels that copy them
        out are left out of the call's kernels (CUPTI paused), so they count as nobody's work."""
        owners = self._owners
        if owners is not None:
            owners.pause(True)
        try:
            self.prints.add(name, out)
        finally:
            if owners is not None:
                owners.pause(False)

    def _note_writes(self, out: Any, name: str, inside: bool, glue: bool, since: Optional[int] = None) -> None:
        """`since`: a custom operator's sequence number at entry; a storage that an operator of
        its body wrote keeps that writer (the code that computed it)."""
        import torch

        self.seq += 1
        items = out if isinstance(out, (tuple, list)) else [out]
        for t in items:
            if isinstance(t, torch.Tensor):
                try:
                    ptr = t.untyped_storage().data_ptr()
                except Exception:
                    continue
                if glue and name.split("::", 1)[-1].startswith(("view", "reshape", "_reshape", "as_strided",
                                                                 "expand", "permute", "transpose", "t",
                                                                 "slice", "select", "unsqueeze", "squeeze",
                                                                 "alias", "detach", "_unsafe_view", "split",
                                                                 "chunk", "narrow", "unbind", "flatten")) \
                        and ptr in self.writers:
                    continue  # a view does not write
                if since is not None and ptr in self.writers and self.writers[ptr][0] > since:
                    continue
                self.writers[ptr] = (self.seq, name, inside, glue)

    def producer(self, out: Any) -> dict[str, Any]:
        """Who last wrote the storage of the returned tensor(s)."""
        import torch

        items = out if isinstance(out, (tuple, list)) else [out]
        found = []
        for t in items:
            if not isinstance(t, torch.Tensor):
                continue
            try:
                ptr = t.untyped_storage().data_ptr()
            except Exception:
                continue
            writer = self.writers.get(ptr)
            if writer is None:
                found.append({"by": "unknown"})
                continue
            seq, name, inside, glue = writer
            if name.startswith("own-op:") or glue:
                by = "own" if (inside or name.startswith("own-op:") or self.last_own_end > seq) else "torch-glue"
            elif self.last_own_end > seq and not inside:
                by = "own-after-torch"  # an own call ran after torch wrote it: it may have rewritten it
            else:
                by = "torch-inside-own" if inside else "torch"
            found.append({"by": by, "op": name})
        return found[0] if len(found) == 1 else {"by": "mixed", "items": found}

    def __enter__(self) -> "Recorder":
        import torch
        from torch.utils._python_dispatch import TorchDispatchMode

        recorder = self

        class _Mode(TorchDispatchMode):
            @classmethod
            def _should_skip_dynamo(cls) -> bool:
                return False  # else the first dispatch imports torch._dynamo (seconds, and temp files)

            def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[override]
                return recorder._dispatch(func, args, kwargs or {})

        if self.device.startswith("cuda"):
            from gatekeeper.runtime import kernel_owner

            self._owners = kernel_owner.active()
            if self._owners is not None:
                self._owners.record(True)  # kernels by their launcher (gatekeeper/runtime/kernel_owner.py)
            else:
                self._profiler = _start_profiler()
        self._mode = _Mode()
        self._mode.__enter__()
        self._stack_len = torch._C._len_torch_dispatch_stack()
        self._hook = self._profile
        sys.setprofile(self._hook)
        return self

    def __exit__(self, *exc: Any) -> None:
        import torch

        hook = sys.getprofile()
        sys.setprofile(None)
        if self._owners is not None:
            self._owners.record(False)
        if hook is not self._hook:
            self.tampered.append("sys.setprofile was replaced during the call")
        if torch._C._len_torch_dispatch_stack() != self._stack_len:
            self.tampered.append("the dispatch mode stack changed during the call")
        try:
            self._mode.__exit__(None, None, None)
        except Exception as error:  # the submission popped our mode
            self.tampered.append(f"the dispatch mode could not be exited ({type(error).__name__})")

    def finish_device(self) -> None:
        """After the caller's stream-escape check (the profiler's stop syncs the whole device)."""
        if self._profiler is not None:
            self.kernels = _stop_profiler(self._profiler)
            self._profiler = None
        elif self._owners is not None:
            import torch

            torch.cuda.synchronize()
            from gatekeeper.runtime.kernel_owner import classed

            self.owned_kernels = classed(self._owners.collect())

    def summary(self, out: Any, wall_s: float) -> dict[str, Any]:
        ops = [{"name": n, "inside_own": i, "glue": g, "count": int(c), "s": s}
               for (n, i, g), (c, s) in sorted(self.ops.items(), key=lambda kv: -kv[1][1])]
        return {
            "wall_s": wall_s,
            "own_modules": sorted(m for m in self.own if "." not in m)[:20],
            "own_calls": [{"name": n, "count": int(c), "s": w, "self_s": s} for n, (c, w, s) in self.own_calls.items()],
            "ops": ops[:200],
            "kernels": self.owned_kernels[:500] or [{"name": n[:300], "s": s} for n, s in self.kernels[:500]],
            "ownership": _ownership() if self.device.startswith("cuda") else None,
            "producer": self.producer(out),
            "result_from_torch": self.prints.source_of(out),
            "tampered": self.tampered,
        }


def _ownership() -> dict[str, Any]:
    from gatekeeper.runtime.kernel_owner import status

    return status()


def _start_profiler() -> Optional[Any]:
    try:
        from torch.profiler import ProfilerActivity, profile

        prof = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=False,
                       with_stack=False, profile_memory=False)
        prof.__enter__()
        return prof
    except Exception:
        return None


def _stop_profiler(prof: Any) -> list[tuple[str, float]]:
    """(kernel name, device seconds) of every kernel the call launched."""
    import torch

    torch.cuda.synchronize()
    try:
        prof.__exit__(None, None, None)
        totals: dict[str, float] = {}
        for event in prof.events():
            kind = str(getattr(event, "device_type", ""))
            if "CUDA" not in kind:
                continue
            try:  # a kernel's own event: its interval is its device time
                us = float(event.time_range.elapsed_us())
            except AttributeError:
                us = float(getattr(event, "device_time_total", 0.0) or 0.0)
            totals[event.name] = totals.get(event.name, 0.0) + us / 1e6
        return sorted(totals.items(), key=lambda kv: -kv[1])
    except Exception:
        return []


def warm_up(device: str) -> None:
    """Pay the first-use costs (imports, operator lookups) outside any checked call."""
    import torch

    x = torch.randn(8, 8, device=device)
    recorder = Recorder(device)
    with recorder:
        (x @ x).relu().sum()
    recorder.finish_device()


class op_names:
    """Context manager: the names of the ATen compute (non-glue) operators dispatched inside."""

    def __enter__(self) -> set[str]:
        from torch.utils._python_dispatch import TorchDispatchMode

        names: set[str] = set()

        class _Names(TorchDispatchMode):
            @classmethod
            def _should_skip_dynamo(cls) -> bool:
                return False

            def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[override]
                name = str(func.name())
                if not is_glue(name):
                    names.add(name)
                return func(*args, **(kwargs or {}))

        self._mode = _Names()
        self._mode.__enter__()
        return names

    def __exit__(self, *exc: Any) -> None:
        self._mode.__exit__(*exc)
