"""The harness jitter object a problem asks for sizes (`popcorn_pri.jitter_int(n, align=8)`).

At nominal it returns n. Jittered, it returns a size near `n * scale` (a small random
spread around the trial's scale), a multiple of `align`, odd when `odd` is asked and
alignment allows, and never below `align`. Deterministic for a given seed, so `--seed`
reproduces the shapes.
"""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True)
class JitterSpec:
    scale: float = 1.0
    seed: int = 0
    odd: bool = False

    @property
    def nominal(self) -> bool:
        return self.scale == 1.0 and not self.odd

    def to_json(self) -> dict:
        return {"scale": self.scale, "seed": self.seed, "odd": self.odd}

    @classmethod
    def from_json(cls, data: dict) -> "JitterSpec":
        return cls(float(data["scale"]), int(data["seed"]), bool(data["odd"]))


def jitter_value(n: int, spec: JitterSpec, rng: random.Random, align: int = 1,
                 bounds: tuple[int, int] | None = None) -> int:
    align = max(1, int(align))
    if spec.nominal:
        return n
    target = n * spec.scale * rng.uniform(0.9, 1.1)
    value = max(align, int(round(target / align)) * align)
    if bounds is not None:
        low, high = bounds
        value = min(max(value, low), high)
        value = max(align, (value // align) * align)
    if spec.odd and align == 1 and value % 2 == 0:
        value = value + 1 if bounds is None or value + 1 <= bounds[1] else max(1, value - 1)
    if value == n:  # a jitter that lands on nominal proves nothing: step off it
        value = n + align if spec.scale >= 1 else max(align, n - align)
    return value


class Jitter:
    """Injected into problems under the configured names (e.g. `popcorn_pri`)."""

    def __init__(self, spec: JitterSpec) -> None:
        self._spec = spec
        self._rng = random.Random(spec.seed)
        self.calls: list[tuple[int, int, int]] = []  # (n, align, returned)

    def jitter_int(self, n: int, align: int = 1, *args, **kwargs) -> int:
        value = jitter_value(int(n), self._spec, self._rng, align)
        self.calls.append((int(n), int(align), value))
        return value

    # Other spellings a harness might offer; all route through the same jitter.
    def jitter(self, n: int, align: int = 1, *args, **kwargs) -> int:
        return self.jitter_int(n, align)
