"""Configuration: TOML files, profiles and per-rule settings, validated by pydantic.

Resolution order (later wins): built-in defaults, the first `gatekeeper.toml` or
`pyproject.toml` with `[tool.gatekeeper]` found walking up from the submission (or the
file named by `--config`), then command-line overrides.
"""

from __future__ import annotations

import difflib
import os
import stat
import sys
from pathlib import Path
from typing import Any, Iterable, Literal, Optional

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, PrivateAttr, ValidationError

from gatekeeper.choices import ProfileName  # noqa: F401 - re-exported: callers import it from here
from gatekeeper.errors import UsageError
from gatekeeper.path_errors import unreadable_folder
from gatekeeper.report import Severity

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

Profile = Literal["strict", "default", "lenient"]
CONFIG_MAX_BYTES = 1_000_000  # a configuration file is a few KiB: past this it is not one (--config /dev/zero)
MAX_JOBS_CEILING = 256


def max_jobs() -> int:
    """The most parallel processes `check` starts: more than 4 per CPU only thrash (and forked
    one by one they can exhaust memory before the first file is checked)."""
    return min(MAX_JOBS_CEILING, 4 * (os.cpu_count() or 1))
PROFILES: tuple[str, ...] = ("strict", "default", "lenient")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RuleSettings(_Strict):
    enabled: bool = True
    severity: Optional[Severity] = None
    options: dict[str, Any] = Field(default_factory=dict)


_UNCONFIGURED = RuleSettings()  # a rule the configuration does not mention; never mutated


class JitterSettings(_Strict):
    # Global names under which the harness jitter object is injected into problems.
    names: list[str] = Field(default_factory=lambda: ["popcorn_pri"])
    shapes: int = Field(default=4, ge=3, description="jittered shape sets besides nominal")
    low: float = Field(default=0.5, gt=0, description="smallest jitter, as a fraction of nominal")
    high: float = Field(default=2.0, gt=0, description="largest jitter, as a fraction of nominal")


class LimitSettings(_Strict):
    # Bounds checked when the configuration loads: a zero timeout or a negative memory cap would
    # fail every run later, blamed on the problem or the submission.
    import_timeout_s: float = Field(default=60.0, gt=0, le=86_400, allow_inf_nan=False)
    build_timeout_s: float = Field(default=600.0, gt=0, le=86_400, allow_inf_nan=False)
    call_timeout_s: float = Field(default=60.0, gt=0, le=86_400, allow_inf_nan=False)
    memory_mb: int = Field(default=16384, ge=64, description="memory cap of a sandboxed worker, in MiB")
    static_timeout_s: float = Field(default=60.0, gt=0, le=86_400, allow_inf_nan=False, description="wall clock for the static stage of one "
                                    "file (milliseconds normally); past it the file's verdict is error, exit 3")


class BuildSettings(_Strict):
    """`[build]`: how the build stage compiles extensions (docs/configuration.md)."""

    precompiled_header: bool = Field(
        default=False, description="compile C++ extensions against a precompiled torch/extension.h (made "
        "once per toolchain: about a minute and 1.6 GB; then ~10 s less per build). For leaderboards and CI; "
        "GATEKEEPER_PRECOMPILED_HEADER=1/0 overrides")


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
    input_sets: int = Field(default=256, ge=1, description="distinct input sets generated ahead (within "
                            "input_sets_max_mb); calls beyond them get rolled copies, never a repeat")
    input_sets_max_mb: int = Field(default=8192, ge=1, description="cap on the memory the input sets take")
    l2_flush_factor: float = Field(default=2.0, ge=2.0, description="flush buffer size over the L2 size")
    output_checks: int = Field(default=4, ge=1, description="timed calls per block whose outputs are "
                               "compared with the reference's (drawn after the block ran)")
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


class ProblemMap(_Strict):
    """`[[problem_map]]`: which problem a submission is checked against, so that no
    `--problem` flag is needed (docs/configuration.md). Paths are relative to the
    configuration file's folder. `submissions` is a glob (`*`, `**`, `?`) whose `{field}`
    parts capture a piece of a path segment; `problem` is a path template filled from them
    (plus `{stem}`, `{name}` and `{dir}` of the submission) that may itself be a glob
    matching exactly one file, e.g. KernelBench's
    `submissions = "runs/level{level}/{id}_*.py"`, `problem = "KernelBench/level{level}/{id}_*.py"`."""

    submissions: str = Field(description="glob of submission paths, with {field} captures")
    problem: str = Field(description="problem path template; may be a glob matching one file")


class Config(_Strict):
    profile: Profile = "default"
    # --select / --ignore in configuration form: codes, code prefixes (GK2), categories, stages.
    select: list[str] = Field(default_factory=list)
    ignore: list[str] = Field(default_factory=list)
    problem_map: list[ProblemMap] = Field(default_factory=list)
    # Files that define none of these classes are not submissions (helpers, problem files):
    # `check --submissions-only` (the pre-commit hook) skips them.
    submission_classes: list[str] = Field(default_factory=lambda: ["ModelNew"])
    rule_dirs: list[str] = Field(default_factory=list)
    # `check FOLDER` skips these (gatekeeper/discovery.py): `exclude` replaces the defaults,
    # `extend-exclude` adds to them; ruff's spelling (with a hyphen) is accepted too.
    exclude: Optional[list[str]] = Field(default=None, description="patterns skipped when walking folders "
                                         "(default: version control, virtual environments, caches, build output)")
    extend_exclude: list[str] = Field(default_factory=list, validation_alias=AliasChoices(
        "extend_exclude", "extend-exclude"), description="patterns skipped besides `exclude`")
    allow_suppressions: bool = Field(
        default=False,
        description="honour `# gatekeeper: ignore[GK###]` comments inside submissions",
    )
    max_file_bytes: int = Field(default=2_000_000, ge=1, description="larger submissions are refused unanalysed "
                                "(and standard input is read up to this size)")
    max_file_lines: int = Field(default=20_000, ge=1, description="longer submissions are refused unanalysed")
    require_isolation: bool = Field(
        default=False, description="refuse to run code (build, behaviour, timing) unless bubblewrap isolation works")
    require_problem: bool = Field(
        default=True, description="`gatekeeper check` never passes a submission it has no problem for: "
        "without the reference nothing is compared, so a pass would say what did not happen; what would pass "
        "is an error (exit 3) instead, and findings still reject. false: the rules alone may pass it (GK006 "
        "says which rules did not run)")
    jobs: int = Field(default=1, ge=1, le=MAX_JOBS_CEILING, description="parallel processes of `check` "
                      "(at most 4 per CPU)")
    keep_going: bool = False
    rules: dict[str, RuleSettings] = Field(default_factory=dict)
    jitter: JitterSettings = Field(default_factory=JitterSettings)
    limits: LimitSettings = Field(default_factory=LimitSettings)
    build: BuildSettings = Field(default_factory=BuildSettings)
    timing: TimingSettings = Field(default_factory=TimingSettings)
    # Where the config came from, for `config show`; not a user key.
    source: Optional[str] = Field(default=None, exclude=True)

    _deselected: Optional[frozenset] = PrivateAttr(default=None)
    _idle_stages: Optional[frozenset] = PrivateAttr(default=None)

    def deselected(self) -> frozenset:
        """Codes switched off by select/ignore (computed once, from the catalogue)."""
        if self._deselected is None:
            if not (self.select or self.ignore):
                self._deselected = frozenset()
            else:
                from gatekeeper.catalogue import catalogue, matches

                self._deselected = frozenset(
                    code for code, entry in catalogue(self.rule_dirs).items()
                    if (self.select and not any(matches(entry, s) for s in self.select))
                    or any(matches(entry, s) for s in self.ignore))
        return self._deselected

    def idle_stages(self) -> frozenset:
        """Stages (StageName) left with no enabled code by select/ignore or `enabled = false`:
        the pipeline skips them as deselected instead of running them and dropping what they
        find (which reported `behaviour: passed` for a stage whose verdict nobody asked for)."""
        if self._idle_stages is None:
            if not (self.select or self.ignore or any(not r.enabled for r in self.rules.values())):
                self._idle_stages = frozenset()
            else:
                from gatekeeper.catalogue import idle_stages

                self._idle_stages = idle_stages(self)
        return self._idle_stages

    def rule(self, code: str) -> RuleSettings:
        settings = self.rules.get(code) or _UNCONFIGURED  # read-only: asked for every rule of every file
        if settings.enabled and (self.select or self.ignore) and code in self.deselected():
            return settings.model_copy(update={"enabled": False})
        return settings


def read_config_bytes(path: Path) -> bytes:
    """A configuration file's bytes: a regular file of at most CONFIG_MAX_BYTES (a FIFO, a
    device or an endless file would block or fill memory). Else a usage error (exit 2)."""
    from gatekeeper.path_errors import why_missing

    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer; the type is checked on what was opened
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        if not os.path.lexists(path) or os.path.islink(path) or os.path.isdir(path):
            raise UsageError(f"cannot read config file {path}: {why_missing(path)}") from None
        raise UsageError(f"cannot read config file {path}: {exc.strerror}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise UsageError(f"cannot read config file {path}: {why_missing(path)}; point --config at a TOML file")
    with os.fdopen(fd, "rb") as handle:
        try:
            raw = handle.read(CONFIG_MAX_BYTES + 1)
        except OSError as exc:
            raise UsageError(f"cannot read config file {path}: {exc.strerror}") from None
    if len(raw) > CONFIG_MAX_BYTES:
        raise UsageError(f"config file {path} is larger than {CONFIG_MAX_BYTES:,} bytes, too large for a "
                         "configuration file; point --config at the TOML file")
    return raw


def _read_toml(path: Path) -> dict[str, Any]:
    raw = read_config_bytes(path)
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise UsageError(f"config file {path} is not valid TOML: {exc}") from None
    if path.name == "pyproject.toml":
        section = data.get("tool", {}).get("gatekeeper", {})
        if not isinstance(section, dict):
            raise UsageError(f"config file {path}: [tool.gatekeeper] must be a table, not {type(section).__name__}")
        return section
    return data


def find_config(start: Path) -> Optional[Path]:
    """The nearest gatekeeper.toml, or pyproject.toml with [tool.gatekeeper], above start."""
    here = start if start.is_dir() else start.parent
    for folder in [here, *here.resolve().parents]:
        candidate = folder / "gatekeeper.toml"
        pyproject = folder / "pyproject.toml"
        try:  # pathlib's is_file raises on a folder without search permission (EACCES)
            has_config, has_pyproject = candidate.is_file(), pyproject.is_file()
        except OSError as exc:
            # A configuration there may exist: guessing the defaults would run with settings nobody chose.
            raise UsageError(unreadable_folder(folder, exc) + ", or give the configuration with --config") from None
        if has_config:
            return candidate
        if has_pyproject:
            try:
                text = read_config_bytes(pyproject).decode("utf-8")
            except (UsageError, UnicodeDecodeError):
                continue  # unreadable or huge: as before, another project's file is not ours to judge
            if "gatekeeper" not in text:
                continue  # another project's file: its syntax is not ours to judge
            try:
                data = tomllib.loads(text)
            except tomllib.TOMLDecodeError as exc:
                # Silently falling back to the defaults would run with settings nobody chose.
                raise UsageError(f"config file {pyproject} is not valid TOML: {exc}; fix it, or point "
                                 "--config at another file") from None
            if "gatekeeper" in data.get("tool", {}):
                return pyproject
    return None


def _model_at(loc: tuple) -> Optional[type[BaseModel]]:
    """The settings model that holds the key at `loc` (for suggesting the valid keys)."""
    model: Any = Config
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        if model is Config and part == "rules":
            model = "rules"
            continue
        if model == "rules":
            model = RuleSettings
            continue
        field = getattr(model, "model_fields", {}).get(part)
        if field is None:
            return None
        annotation = field.annotation
        inner = getattr(annotation, "__args__", (annotation,))
        model = next((a for a in inner if isinstance(a, type) and issubclass(a, BaseModel)), None)
        if model is None:
            return None
    return model if isinstance(model, type) else None


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    match = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.5)
    return f"; did you mean '{match[0]}'?" if match else ""


def _explain(exc: ValidationError, path: Optional[Path]) -> str:
    where = f" in {path}" if path else ""
    parts = []
    for err in exc.errors():
        key = ".".join(str(p) for p in err["loc"])
        if err["type"] == "extra_forbidden":
            model = _model_at(tuple(err["loc"]))
            valid = [k for k in (model.model_fields if model else {}) if k not in ("source", "deselected")]
            hint = did_you_mean(str(err["loc"][-1]), valid) or (f"; valid keys: {', '.join(valid)}" if valid else "")
            parts.append(f"unknown key '{key}'{where}{hint}")
        else:
            parts.append(f"'{key}'{where}: {err['msg']}")
    return "invalid configuration: " + "; ".join(parts)


def _check_codes(config: Config, path: Optional[Path], from_cli: Iterable[str] = ()) -> None:
    """Rule codes, rule options and selectors must exist: a typo (GK2O3) would otherwise
    switch nothing off, silently."""
    if not (config.rules or config.select or config.ignore):
        return
    from gatekeeper.catalogue import catalogue, closest, selector_known

    where = f" in {path}" if path else ""
    known = catalogue(config.rule_dirs)
    for code, settings in config.rules.items():
        entry = known.get(code)
        if entry is None:
            near = closest(code, config.rule_dirs)
            hint = f"; did you mean '{near}'?" if near else "; `gatekeeper rules` lists every code"
            raise UsageError(f"invalid configuration: unknown rule code '{code}' (key 'rules.{code}'){where}{hint}")
        for option in settings.options:
            if option not in entry.options:
                valid = ", ".join(entry.options) or "none"
                raise UsageError(
                    f"invalid configuration: unknown option '{option}' for {code} {entry.name} (key "
                    f"'rules.{code}.options.{option}'){where}{did_you_mean(option, entry.options)}; its options: {valid}")
    for key in ("select", "ignore"):
        for selector in getattr(config, key):
            if not selector_known(selector, config.rule_dirs):
                near = closest(selector, config.rule_dirs)
                hint = f"; did you mean '{near}'?" if near else (
                    "; give a code (GK203), a code prefix (GK2), a category (hardcoded-shape) or a stage (behaviour)")
                origin = f"--{key}" if key in from_cli else f"'{key}'{where}"
                raise UsageError(f"invalid configuration: '{selector}' in {origin} matches no code{hint}")


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
    if config.select or config.ignore:
        pass  # validated below, once the rule folders are resolved
    config.source = str(path) if path else None
    if path is not None:
        base = path.parent
        config.rule_dirs = [str((base / d).resolve()) for d in config.rule_dirs]
    _check_codes(config, path, [k for k, v in (overrides or {}).items() if v is not None])
    return config
