"""The reference "in float64" for the error budget and the fair value judgment, also where
its forward pins a narrower precision itself.

`model.double()` and float64 inputs widen only what the reference does not cast: a forward
that writes `xf = x.float()`, `w.float()` or `out.to(torch.bfloat16)` (KernelBench-Hard's
bf16 problems do) computes in float32 again and returns the very values of the native run.
The honest error measured against that "float64" output is 0, and every honest submission
whose float32 sums run in another order fails the fair judgment on scaled inputs (GPU round
18: two honest bf16 GEMM solutions rejected as GK673 with "the honest bfloat16 error (0)").

`widened()` is a torch function mode for the wide forward only: a cast or an allocation to a
compute precision (float32, float16, bfloat16) is made in float64 instead. Quantisation
formats (float8, float4) stay as written: their rounding is the problem's arithmetic, not its
precision. A bit reinterpretation (`Tensor.view(dtype)`) is never widened; of a float64
tensor into another width it stops the wide run (the bits were the narrow dtype's where the
reference allocated them), and the trial has no float64 reference, as for an op without
float64 support.
"""

from __future__ import annotations

from typing import Any, Callable, Optional


def widened() -> Any:
    """A context manager: the torch function mode described above."""
    import torch
    from torch.overrides import TorchFunctionMode

    narrow = frozenset({torch.float32, torch.float16, torch.bfloat16})
    to_wide = frozenset({torch.Tensor.float, torch.Tensor.half, torch.Tensor.bfloat16})
    untouched = frozenset({torch.Tensor.view})

    def wide(value: Any) -> Any:
        return torch.float64 if isinstance(value, torch.dtype) and value in narrow else value

    class Widened(TorchFunctionMode):
        def __torch_function__(self, func: Callable[..., Any], types: Any, args: tuple = (),
                               kwargs: Optional[dict[str, Any]] = None) -> Any:
            kwargs = kwargs or {}
            if func in untouched:
                target = args[1] if len(args) == 2 else kwargs.get("dtype")
                if isinstance(target, torch.dtype) and isinstance(args[0], torch.Tensor) \
                        and args[0].dtype == torch.float64 and target.itemsize != 8:
                    raise TypeError("a bit view of a tensor widened to float64")
                return func(*args, **kwargs)
            if func in to_wide and args and isinstance(args[0], torch.Tensor) and not args[0].is_complex():
                return args[0].double()  # (the handler runs with this mode off: no recursion)
            if "dtype" in kwargs:
                kwargs = dict(kwargs, dtype=wide(kwargs["dtype"]))
            return func(*(wide(a) for a in args), **kwargs)

    return Widened()


__all__ = ["widened"]
