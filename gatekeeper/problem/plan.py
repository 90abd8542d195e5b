"""The trials of one behaviour run, all derived from one seed.

Three nominal trials (two different random inputs for the caching checks, one set of
values to overwrite the inputs in place), then the problem's other canonical shapes
(KernelBench-Hard's shapes.py, `jitter-shape-N`, at most MAX_CANONICAL), then `shapes`
jittered trials: at least one smaller and one larger than nominal, and odd sizes where
alignment allows. Each jittered trial carries a few alternative attempts, so that a
jitter the reference rejects is retried with another.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

import libcst as cst

from gatekeeper.problem.implicit import (
    choose_constants, jitter_source, module_int_constants, rewrite_constants, sizing_constants, small_input_constants,
)
from gatekeeper.problem.jitter import JitterSpec
from gatekeeper.problem.sidecar import Sidecar

NOMINAL = ("nominal", "nominal-second", "nominal-overwrite")
MIN_IMPLICIT_SIZE = 8
MAX_CANONICAL = 3  # canonical shapes run besides nominal: each costs a reference and a submission call


@dataclass
class Attempt:
    spec: JitterSpec
    source: str
    constants: dict[str, int]

    def to_json(self) -> dict[str, Any]:
        return {"spec": self.spec.to_json(), "source": self.source, "constants": self.constants}


@dataclass
class Trial:
    name: str
    value_seed: int
    attempts: list[Attempt] = field(default_factory=list)

    @property
    def jittered(self) -> bool:
        return self.name not in NOMINAL

    def to_json(self, init_seed: int) -> dict[str, Any]:
        return {"name": self.name, "value_seed": self.value_seed, "init_seed": init_seed,
                "attempts": [a.to_json() for a in self.attempts]}


def _scales(count: int, low: float, high: float) -> list[tuple[float, bool]]:
    """(scale, odd) per jittered trial: smaller, larger, then odd ones in between."""
    base = [(low, False), (high, False), ((1 + low) / 2, True), ((1 + high) / 2, True)]
    while len(base) < count:
        base.append((low + (high - low) * len(base) / (count + 1), len(base) % 2 == 0))
    return base[:count]


def plan_trials(source: str, sidecar: Sidecar, seed: int, shapes: int, low: float, high: float,
                attempts: int = 4, canonical: Sequence[dict[str, int]] = ()) -> tuple[list[Trial], dict[str, int]]:
    """The trials, and the implicit sizing constants that will be jittered (name: nominal).
    `canonical`: the problem's declared shapes (constant name: size), run as they are."""
    rng = random.Random(seed)
    module = cst.parse_module(source)
    chosen: dict[str, int] = {}
    small: dict[str, int] = {}
    if sidecar.jitter.enabled:
        chosen = choose_constants(sizing_constants(module), MIN_IMPLICIT_SIZE, sidecar.jitter.ranges)
        small = {k: v for k, v in small_input_constants(module, MIN_IMPLICIT_SIZE).items() if k not in chosen}
        chosen.update(small)
        # A fixed dimension (one size in every declared shape) is part of the problem: not jittered.
        chosen = {k: v for k, v in chosen.items() if k not in sidecar.shapes.fixed}
        small = {k: v for k, v in small.items() if k in chosen}
    nominal = Attempt(JitterSpec(), source, dict(chosen))
    trials = [Trial(name, rng.getrandbits(31), [nominal]) for name in NOMINAL]
    trials += _canonical_trials(module, canonical, rng)
    if not sidecar.jitter.enabled:
        return trials, chosen
    for index, (scale, odd) in enumerate(_scales(shapes, low, high)):
        trial = Trial(f"jitter-{index + 1}", rng.getrandbits(31))
        for attempt in range(attempts):
            # Later attempts move towards nominal and drop the odd requirement last.
            step = attempt / attempts
            this_scale = scale + (1.0 - scale) * step * 0.6
            spec = JitterSpec(scale=round(this_scale, 4), seed=rng.getrandbits(31), odd=odd and attempt < attempts - 1)
            # Small sizes step by one on the first attempts only: a problem that rejects
            # them (a size that must stay 4) still gets its larger sizes jittered.
            step_small = small if attempt < attempts - 1 else {}
            use = {k: v for k, v in chosen.items() if k not in small or k in step_small}
            text, values = jitter_source(module, use, spec, sidecar.jitter.ranges, sidecar.jitter.align,
                                         small=step_small)
            values = {**{k: v for k, v in chosen.items() if k not in use}, **values}
            trial.attempts.append(Attempt(spec, text, values))
        trials.append(trial)
    return trials, chosen


def _canonical_trials(module: cst.Module, canonical: Sequence[dict[str, int]], rng: random.Random) -> list[Trial]:
    """One trial per declared shape that differs from the nominal constants."""
    nominal = module_int_constants(module)
    trials: list[Trial] = []
    for shape in canonical:
        values = {k: v for k, v in shape.items() if k in nominal}
        if not values or all(nominal[k] == v for k, v in values.items()) or len(trials) >= MAX_CANONICAL:
            continue
        source = rewrite_constants(module, values)
        trials.append(Trial(f"jitter-shape-{len(trials) + 1}", rng.getrandbits(31), [Attempt(JitterSpec(), source, values)]))
    return trials


def draw_seed(given: Optional[int]) -> int:
    import os

    return given if given is not None else int.from_bytes(os.urandom(4), "big") & 0x7FFFFFFF
