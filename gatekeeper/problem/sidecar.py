"""The optional sidecar `<problem>.toml`: jitter ranges, tolerances per dtype, allowed ops, dtype.

    dtype = "float32"
    device = "cpu"
    allowed_ops = ["torch.matmul"]
    forbidden = ["torch.nn.functional.scaled_dot_product_attention", "cublas*"]
    [jitter]
    enabled = true
    ranges = { batch_size = [3, 64] }     # implicit jitter: inclusive range per constant
    align = { dim = 8 }
    [tolerances.float32]
    atol = 1e-4
    rtol = 1e-4
    [values]                              # the call schedule's value distributions
    fixed = [1]                           # inputs left as drawn (indices, probabilities, SPD)
    distributions = ["scale-up", "positive"]   # default: all of problem.values.DISTRIBUTIONS
    [shapes]                              # declared shapes (KernelBench-Hard keeps them in shapes.py)
    fixed = ["HEAD_DIM"]                  # constants every size of the problem keeps: never jittered,
                                          # and a kernel may bake them in
    declared = [{ BATCH = 2, SEQ = 1024 }, { BATCH = 1, SEQ = 4096 }]
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from gatekeeper.errors import InfrastructureError
from gatekeeper.problem.formats import DEFAULT_TOLERANCES as FORMAT_TOLERANCES, ProblemFormat, known_dtype

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

# (atol, rtol) by dtype when the sidecar names none: KernelBench's (the default format). A
# loaded Problem uses its own format's table instead (gatekeeper/problem/formats.py).
DEFAULT_TOLERANCES: dict[str, tuple[float, float]] = FORMAT_TOLERANCES[ProblemFormat.KERNELBENCH]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Tolerance(_Strict):
    # finite: NaN or inf would pass every output
    atol: float = Field(ge=0, allow_inf_nan=False)
    rtol: float = Field(ge=0, allow_inf_nan=False)


class SidecarJitter(_Strict):
    enabled: bool = True
    ranges: dict[str, tuple[int, int]] = Field(default_factory=dict)
    align: dict[str, int] = Field(default_factory=dict)

    @field_validator("ranges")
    @classmethod
    def _ordered(cls, value: dict[str, tuple[int, int]]) -> dict[str, tuple[int, int]]:
        for name, (low, high) in value.items():
            if not 1 <= low <= high:
                raise ValueError(f"range for {name} must satisfy 1 <= low <= high")
        return value


class SidecarValues(_Strict):
    """Which inputs the call schedule may draw from other value distributions, and which."""

    enabled: bool = True
    fixed: list[int] = Field(default_factory=list)
    distributions: Optional[list[str]] = None  # None: all

    @field_validator("distributions")
    @classmethod
    def _known(cls, value: Optional[list[str]]) -> Optional[list[str]]:
        from gatekeeper.problem.values import DISTRIBUTIONS

        unknown = [d for d in value or [] if d not in DISTRIBUTIONS and d != "normal"]
        if unknown:
            raise ValueError(f"unknown distribution(s) {unknown}; known: {', '.join(DISTRIBUTIONS)}")
        return value

    def allowed(self) -> list[str]:
        from gatekeeper.problem.values import DISTRIBUTIONS

        if not self.enabled:
            return []
        return list(DISTRIBUTIONS) if self.distributions is None else list(self.distributions)


class SidecarShapes(_Strict):
    """The problem's declared shapes and fixed dimensions (gatekeeper.problem.dimensions)."""

    fixed: list[str] = Field(default_factory=list)
    declared: list[dict[str, int]] = Field(default_factory=list)


class Sidecar(_Strict):
    dtype: Optional[str] = None
    # Where inputs and models live: "cpu" pins a CPU problem even on a GPU machine; by default
    # "cuda" when available (KernelBench moves inputs to the GPU), else "cpu".
    device: Optional[Literal["cpu", "cuda"]] = None
    allowed_ops: list[str] = Field(default_factory=list)
    # Ops the submission may not leave to torch or a vendor library, under every profile
    # (names or fnmatch patterns, matched like the GK3xx `allow` option).
    forbidden: list[str] = Field(default_factory=list)
    jitter: SidecarJitter = Field(default_factory=SidecarJitter)
    tolerances: dict[str, Tolerance] = Field(default_factory=dict)
    # Operations the problem must do, for the timing stage's compute floor when torch's
    # FlopCounterMode counts none (custom ops, elementwise work); read by gatekeeper.timing.
    flops: Optional[float] = Field(default=None, ge=0)
    values: SidecarValues = Field(default_factory=SidecarValues)
    shapes: SidecarShapes = Field(default_factory=SidecarShapes)

    @field_validator("dtype")
    @classmethod
    def _known_dtype(cls, value: Optional[str]) -> Optional[str]:
        return None if value is None else known_dtype(value)

    @field_validator("tolerances")
    @classmethod
    def _known_dtypes(cls, value: dict[str, Tolerance]) -> dict[str, Tolerance]:
        return {known_dtype(key): tolerance for key, tolerance in value.items()}

    def tolerance(self, dtype: str) -> tuple[float, float]:
        if dtype in self.tolerances:
            return self.tolerances[dtype].atol, self.tolerances[dtype].rtol
        return DEFAULT_TOLERANCES.get(dtype, (0.0, 0.0))


def sidecar_path(problem: Path) -> Path:
    return problem.with_suffix(".toml")


def load_sidecar(problem: Path) -> Sidecar:
    """The sidecar beside `problem`, or the defaults when there is none. Invalid: exit 3."""
    path = sidecar_path(problem)
    if not path.is_file():
        return Sidecar()
    try:
        data = tomllib.loads(path.read_text("utf-8"))
        return Sidecar.model_validate(data)
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise InfrastructureError(f"problem sidecar {path} cannot be read: {exc}") from None
    except ValidationError as exc:
        parts = []
        for err in exc.errors():
            key = ".".join(str(p) for p in err["loc"])
            parts.append(f"unknown key '{key}'" if err["type"] == "extra_forbidden" else f"'{key}': {err['msg']}")
        raise InfrastructureError(f"problem sidecar {path} is invalid: " + "; ".join(parts)) from None
