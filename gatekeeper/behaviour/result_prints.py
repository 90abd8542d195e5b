"""Whether a call returned values that torch computed: fingerprints of the outputs of torch's
heavy ops (contractions, reductions), compared with the returned tensor (behaviour.attribution).

A fig-leaf kernel lets torch compute the result and then hands it back: unchanged in torch's
own storage, or copied into a tensor of its own. Either way the returned values are torch's,
bit for bit. An own kernel that computes the result itself, or applies any epilogue to torch's
output, returns different bits at some of the sampled positions. The recorder keeps a
fingerprint (up to SAMPLES values at evenly spread positions, copied where they live: no
device synchronisation) of every heavy op's tensor output during a watched call, and at the end
says which op, if any, produced exactly the returned values.
"""

from __future__ import annotations

from typing import Any, Optional

SAMPLES = 64
MAX_PRINTS = 64  # per call: the first heavy outputs are the ones a fig-leaf returns


def _print(tensor: Any) -> Optional[tuple[tuple[Any, ...], Any]]:
    """(shape, dtype, device) and the sampled values, or None for what is not a plain tensor."""
    import torch

    if not isinstance(tensor, torch.Tensor) or tensor.numel() == 0 or tensor.is_sparse \
            or not (tensor.dtype.is_floating_point or tensor.dtype.is_complex):
        return None
    flat = tensor.detach().reshape(-1)
    n = flat.numel()
    positions = torch.linspace(0, n - 1, steps=min(SAMPLES, n), device=flat.device).long()
    return (tuple(tensor.shape), tensor.dtype, tensor.device), flat.index_select(0, positions).clone()


class HeavyPrints:
    def __init__(self) -> None:
        self.prints: list[tuple[str, tuple[Any, ...], Any]] = []

    def add(self, op: str, out: Any) -> None:
        items = out if isinstance(out, (tuple, list)) else [out]
        for item in items:
            if len(self.prints) >= MAX_PRINTS:
                return
            try:
                found = _print(item)
            except Exception:  # an exotic tensor subclass: nothing to compare
                continue
            if found is not None:
                self.prints.append((op, found[0], found[1]))

    def source_of(self, out: Any) -> Optional[str]:
        """The heavy op whose output equals the returned tensor at every sampled position (NaN
        at the same positions counts as equal); "" when the returned values can be compared and
        none matches (the result is not a torch op's); None when there is nothing to compare
        (no heavy op ran, or a constant result)."""
        import torch

        if not self.prints or not isinstance(out, torch.Tensor):
            return None
        try:
            mine = _print(out)
            if mine is None or bool((mine[1] == mine[1][0]).all()) or bool(mine[1].isnan().all()):
                return None  # a constant result (all zeros) is no evidence of where it came from
            for op, key, values in self.prints:
                if key == mine[0] and bool(((values == mine[1]) | (values.isnan() & mine[1].isnan())).all()):
                    return op
        except Exception:
            return None
        return ""
