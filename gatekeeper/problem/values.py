"""Value distributions for the call schedule (issue 11 item 2): inputs that vary in value,
not only in shape. Runs in the reference worker (it imports torch); the submission's process
only ever receives the resulting tensors.

Only floating-point inputs are changed, and never those the problem's sidecar marks as fixed
(`[values] fixed = [1]`: indices, probabilities, positive-definite matrices), and only with
the distributions the sidecar allows (`[values] distributions = [...]`).
"""

from __future__ import annotations

from typing import Any, Callable

DISTRIBUTIONS = ("scale-down", "scale-up", "positive", "sparse", "outliers", "zero-rows", "padding")


def _floats(inputs: list[Any], fixed: list[int]) -> list[int]:
    import torch

    return [i for i, t in enumerate(inputs) if isinstance(t, torch.Tensor) and t.is_floating_point()
            and t.numel() > 0 and i not in fixed]


def _scale_down(t: Any, g: Any) -> Any:
    import torch

    return t * 10.0 ** -int(torch.randint(1, 4, (1,), generator=g))


def _scale_up(t: Any, g: Any) -> Any:
    import torch

    return t * 10.0 ** int(torch.randint(1, 4, (1,), generator=g))


def _positive(t: Any, g: Any) -> Any:
    return t.abs()


def _sparse(t: Any, g: Any) -> Any:
    import torch

    keep = torch.rand(t.shape, generator=g) < 0.1
    return t * keep.to(t.dtype)


def _outliers(t: Any, g: Any) -> Any:
    """A few elements (1 to 4, at random positions) made 100 to 1000 times larger."""
    import torch

    flat = t.clone().reshape(-1)
    count = min(flat.numel(), int(torch.randint(1, 5, (1,), generator=g)))
    where = torch.randperm(flat.numel(), generator=g)[:count]
    factor = float(torch.randint(100, 1001, (1,), generator=g))
    flat[where] = flat[where] * factor + torch.sign(flat[where]) * factor
    return flat.reshape(t.shape)


def _zero_rows(t: Any, g: Any) -> Any:
    """Most rows zero (each with probability 0.7 to 0.97), the rest kept. A row: a slice along
    one dimension other than the innermost (of a vector, single elements)."""
    import torch

    if t.dim() == 0:
        return t
    dim = int(torch.randint(0, max(t.dim() - 1, 1), (1,), generator=g))
    p = 0.7 + 0.27 * float(torch.rand(1, generator=g))
    keep = (torch.rand(t.shape[dim], generator=g) >= p).to(t.dtype)
    shape = [1] * t.dim()
    shape[dim] = t.shape[dim]
    return t * keep.reshape(shape)


def _padding(t: Any, g: Any) -> Any:
    """A trailing block along one dimension zero, as padding to a fixed length leaves it."""
    if t.dim() == 0:
        return t
    import torch

    dim = int(torch.randint(0, t.dim(), (1,), generator=g))
    size = t.shape[dim]
    if size < 2:
        return t
    start = int(torch.randint(1, size, (1,), generator=g))
    out = t.clone()
    out.narrow(dim, start, size - start).zero_()
    return out


_APPLY: dict[str, Callable[[Any, Any], Any]] = {
    "scale-down": _scale_down, "scale-up": _scale_up, "positive": _positive, "sparse": _sparse,
    "outliers": _outliers, "zero-rows": _zero_rows, "padding": _padding,
}


def apply_distribution(inputs: list[Any], dist: str, seed: int, fixed: list[int]) -> list[Any]:
    """The inputs with `dist` applied to every floating-point input not in `fixed` (on CPU)."""
    import torch

    if dist == "normal" or dist not in _APPLY:
        return inputs
    g = torch.Generator().manual_seed(seed)
    out = list(inputs)
    for i in _floats(inputs, fixed):
        t = inputs[i]
        out[i] = _APPLY[dist](t.detach().cpu(), g).to(t.dtype).to(t.device)
    return out


def near_duplicate(inputs: list[Any], sparse: bool, seed: int, fixed: list[int]) -> list[Any]:
    """Copies of the inputs with one element (or a random sparse set) of one float input changed."""
    import torch

    g = torch.Generator().manual_seed(seed)
    out = [t.clone() if isinstance(t, torch.Tensor) else t for t in inputs]
    candidates = _floats(out, fixed)
    if not candidates:
        return out
    which = candidates[int(torch.randint(0, len(candidates), (1,), generator=g))]
    flat = out[which].detach().cpu().reshape(-1).clone()
    n = flat.numel()
    count = max(1, int(n * 0.01)) if sparse else 1
    where = torch.randperm(n, generator=g)[:count]
    # A change well outside the tolerance, of either sign.
    flat[where] = flat[where] + (1.0 + torch.rand(count, generator=g)) * torch.where(
        torch.rand(count, generator=g) < 0.5, -1.0, 1.0).to(flat.dtype) * (1.0 + flat[where].abs())
    out[which] = flat.reshape(out[which].shape).to(out[which].device)
    return out
