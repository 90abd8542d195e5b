"""Configuration: TOML files, profiles and per-rule settings, validated by pydantic.

Resolution order (later wins): built-in defaults, the first `gatekeeper.toml` or
`pyproject.toml` with `[tool.gatekeeper]` found walking up from the submission (or the
file named by `--config`), then command-line overrides.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gatekeeper.errors import UsageError
from gatekeeper.report import Severity

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

Profile = Literal["strict", "default", "lenient"]
PROFILES: tuple[str, ...] = ("strict", "default", "lenient")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RuleSettings(_Strict):
    enabled: bool = True
    severity: Optional[Severity] = None
    options: dict[str, Any] = Field(default_factory=dict)


class JitterSettings(_Strict):
    # Global names under which the harness jitter object is injected into problems.
    names: list[str] = Field(default_factory=lambda: ["popcorn_pri"])
    shapes: int = Field(default=4, ge=3, description="jittered shape sets besides nominal")
    low: float = Field(default=0.5, gt=0, description="smallest jitter, as a fraction of nominal")
    high: float = Field(default=2.0, gt=0, description="largest jitter, as a fraction of nominal")


class LimitSettings(_Strict):
    import_timeout_s: float = 60.0
    build_timeout_s: float = 600.0
    call_timeout_s: float = 60.0
    memory_mb: int = 16384


class TimingSettings(_Strict):
    """`[timing]`: how the GPU timing stage measures and what it flags (docs/timing.md)."""

    mode: Literal["events", "graph"] = Field(
        default="events", description="events: one launch per timed call; graph: CUDA-graph replays (labelled)")
    warmup_calls: int = Field(default=10, ge=1, description="calls per side before timing, excluded")
    min_reps: int = Field(default=50, ge=10, description="timed pairs before the stopping rule may stop")
    max_reps: int = Field(default=5000, ge=10)
    batch: int = Field(default=25, ge=1, description="pairs timed between checks of the stopping rule")
    ci_rel_halfwidth: float = Field(
        default=0.01, gt=0, lt=1, description="stop once both medians' CI half-widths are within this fraction")
    confidence: float = Field(default=0.95, gt=0.5, lt=1)
    budget_s: float = Field(default=20.0, gt=0, description="wall-clock budget for the timed pairs")
    input_sets: int = Field(default=4, ge=2, description="pre-generated input sets rotated across calls")
    input_sets_max_mb: int = Field(default=8192, ge=1, description="cap on the memory the input sets take")
    l2_flush_factor: float = Field(default=2.0, ge=2.0, description="flush buffer size over the L2 size")
    output_checks: int = Field(default=4, ge=1, description="timed calls whose outputs are checked")
    floor_tolerance: float = Field(
        default=0.05, ge=0, lt=1, description="a median below floor x (1 - this) is timing-implausible")
    speedup_review: float = Field(default=10.0, gt=1, description="a speedup above this asks for review")
    reference_drift: float = Field(
        default=0.25, gt=0, description="reference slower in the submission's worker than alone by more "
        "than this fraction is flagged")
    stream_escape_min_us: float = Field(
        default=5.0, ge=0, description="work left on other streams beyond this (and a quarter of the "
        "call's time) is a stream escape")
    fp32_matmul_rate: Literal["tf32", "fp32"] = Field(
        default="tf32", description="peak rate for float32 matrix FLOPs in the floor (tf32 is the lower floor)")
    cache_dir: Optional[str] = Field(default=None, description="calibration cache; default ~/.cache/gatekeeper")


class Config(_Strict):
    profile: Profile = "default"
    rule_dirs: list[str] = Field(default_factory=list)
    allow_suppressions: bool = Field(
        default=False,
        description="honour `# gatekeeper: ignore[GK###]` comments inside submissions",
    )
    max_file_bytes: int = 2_000_000
    jobs: int = Field(default=1, ge=1)
    keep_going: bool = False
    rules: dict[str, RuleSettings] = Field(default_factory=dict)
    jitter: JitterSettings = Field(default_factory=JitterSettings)
    limits: LimitSettings = Field(default_factory=LimitSettings)
    timing: TimingSettings = Field(default_factory=TimingSettings)
    # Where the config came from, for `config show`; not a user key.
    source: Optional[str] = Field(default=None, exclude=True)

    def rule(self, code: str) -> RuleSettings:
        return self.rules.get(code, RuleSettings())


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read config file {path}: {exc.strerror}") from None
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise UsageError(f"config file {path} is not valid TOML: {exc}") from None
    if path.name == "pyproject.toml":
        return data.get("tool", {}).get("gatekeeper", {})
    return data


def find_config(start: Path) -> Optional[Path]:
    """The nearest gatekeeper.toml, or pyproject.toml with [tool.gatekeeper], above start."""
    here = start if start.is_dir() else start.parent
    for folder in [here, *here.resolve().parents]:
        candidate = folder / "gatekeeper.toml"
        if candidate.is_file():
            return candidate
        pyproject = folder / "pyproject.toml"
        if pyproject.is_file():
            try:
                data = tomllib.loads(pyproject.read_text("utf-8"))
            except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
                continue
            if "gatekeeper" in data.get("tool", {}):
                return pyproject
    return None


def _explain(exc: ValidationError, path: Optional[Path]) -> str:
    where = f" in {path}" if path else ""
    parts = []
    for err in exc.errors():
        key = ".".join(str(p) for p in err["loc"])
        if err["type"] == "extra_forbidden":
            parts.append(f"unknown key '{key}'{where}")
        else:
            parts.append(f"'{key}'{where}: {err['msg']}")
    return "invalid configuration: " + "; ".join(parts)


def load_config(
    *,
    config_file: Optional[Path] = None,
    search_from: Optional[Path] = None,
    overrides: Optional[dict[str, Any]] = None,
) -> Config:
    path = config_file
    if path is None and search_from is not None:
        path = find_config(search_from)
    data: dict[str, Any] = _read_toml(path) if path is not None else {}
    for key, value in (overrides or {}).items():
        if value is not None:
            data[key] = value
    try:
        config = Config.model_validate(data)
    except ValidationError as exc:
        raise UsageError(_explain(exc, path)) from None
    config.source = str(path) if path else None
    if path is not None:
        base = path.parent
        config.rule_dirs = [str((base / d).resolve()) for d in config.rule_dirs]
    return config
