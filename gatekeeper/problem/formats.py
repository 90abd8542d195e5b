"""Problem formats: where a problem's files are and what its side files say.

- `kernelbench`: one file defining `Model`, `get_inputs`, `get_init_inputs`; the submission
  defines `ModelNew`. Optional sidecar `<problem>.toml`.
- `seed`: the same, sized through the harness jitter object (`popcorn_pri.jitter_int(n)`).
- `kernelbench-hard`: a folder with `reference.py` (the KernelBench trio), `shapes.py` (the
  canonical shapes), `problem.yaml` (tolerance, forbidden ops); the submission `solution.py`
  defines `Model`. `--problem` may name the folder or its `reference.py`.

Nothing here runs problem code; `shapes.py` is read by gatekeeper.problem.shapes_file.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any, Optional

from gatekeeper.errors import InfrastructureError, UsageError
from gatekeeper.path_errors import not_found


class ProblemFormat(str, Enum):
    KERNELBENCH = "kernelbench"
    SEED = "seed"
    KERNELBENCH_HARD = "kernelbench-hard"


# The class a submission defines, by format.
ENTRY = {ProblemFormat.KERNELBENCH: "ModelNew", ProblemFormat.SEED: "ModelNew",
         ProblemFormat.KERNELBENCH_HARD: "Model"}

# (atol, rtol) by dtype when neither the sidecar nor problem.yaml says otherwise: what the
# format's own harness uses. KernelBench compares every output with atol = rtol = 1e-2;
# KernelBench-Hard's src/eval/correctness.py uses 1e-4 for fp32, 1e-2 for fp16/bf16, 0.1
# for fp8 and exact integers. float64 is not a KernelBench dtype: gatekeeper's own 1e-7.
DEFAULT_TOLERANCES: dict[ProblemFormat, dict[str, tuple[float, float]]] = {
    ProblemFormat.KERNELBENCH: {"float64": (1e-7, 1e-7), "float32": (1e-2, 1e-2), "float16": (1e-2, 1e-2),
                                "bfloat16": (1e-2, 1e-2)},
    ProblemFormat.KERNELBENCH_HARD: {"float64": (1e-7, 1e-7), "float32": (1e-4, 1e-4),
                                     "float16": (1e-2, 1e-2), "bfloat16": (1e-2, 1e-2),
                                     "float8_e4m3fn": (1e-1, 1e-1), "float8_e5m2": (1e-1, 1e-1)},
}
DEFAULT_TOLERANCES[ProblemFormat.SEED] = DEFAULT_TOLERANCES[ProblemFormat.KERNELBENCH]

HARD_REFERENCE = "reference.py"
HARD_SHAPES = "shapes.py"
HARD_YAML = "problem.yaml"


@dataclass(frozen=True)
class Located:
    format: ProblemFormat
    reference: Path  # the Python file that defines Model / get_inputs / get_init_inputs
    folder: Optional[Path] = None  # KernelBench-Hard: the problem's folder
    shapes: Optional[Path] = None
    yaml: Optional[Path] = None


def locate(path: Path) -> Located:
    """The problem's files, from a file or a KernelBench-Hard folder. Missing: exit 2."""
    if path.is_dir():
        reference = path / HARD_REFERENCE
        if not reference.is_file():
            raise UsageError(f"problem folder {path} has no {HARD_REFERENCE}: a KernelBench-Hard problem folder "
                             f"holds {HARD_REFERENCE} (Model, get_inputs, get_init_inputs), {HARD_SHAPES} and "
                             f"{HARD_YAML}; or give --problem the reference file itself")
        return _hard(path, reference)
    if not path.exists():
        raise UsageError(not_found(path, "problem file"))
    if not path.is_file():
        raise UsageError(f"problem path {path} is neither a file nor a folder")
    folder = path.parent
    if path.name == HARD_REFERENCE and ((folder / HARD_SHAPES).is_file() or (folder / HARD_YAML).is_file()):
        return _hard(folder, path)
    return Located(ProblemFormat.KERNELBENCH, path)


def _hard(folder: Path, reference: Path) -> Located:
    shapes, yaml = folder / HARD_SHAPES, folder / HARD_YAML
    for side in (shapes, yaml):
        if os.path.lexists(side) and not side.is_file():  # a folder, a FIFO, a dangling link: never skipped
            raise InfrastructureError(f"problem error: {not_found(side, 'problem file')}; make it a regular file, "
                                      "or remove it")
    return Located(ProblemFormat.KERNELBENCH_HARD, reference, folder,
                   shapes if shapes.is_file() else None, yaml if yaml.is_file() else None)


def text_format(source: str, jitter_names: list[str]) -> ProblemFormat:
    """The seed's format sizes its inputs through the harness jitter object."""
    if any(f"{name}." in source for name in jitter_names) or ".jitter_int(" in source:
        return ProblemFormat.SEED
    return ProblemFormat.KERNELBENCH


def read_yaml(path: Path) -> dict[str, Any]:
    """problem.yaml as a dict. Unreadable or not a mapping: the problem is broken (exit 3)."""
    import yaml

    try:
        data = yaml.safe_load(path.read_text("utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise InfrastructureError(f"problem file {path} cannot be read: {exc}") from None
    except yaml.YAMLError as exc:
        raise InfrastructureError(f"problem file {path} is not valid YAML: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise InfrastructureError(f"problem file {path} must be a YAML mapping (name:, tolerance:, forbidden:), "
                                  f"not a {type(data).__name__}")
    return data


_DTYPE_ALIASES = {"fp32": "float32", "float": "float32", "fp16": "float16", "half": "float16", "bf16": "bfloat16",
                  "fp64": "float64", "double": "float64", "fp8_e4m3": "float8_e4m3fn", "fp8_e5m2": "float8_e5m2",
                  "int": "int32", "long": "int64", "short": "int16", "cfloat": "complex64", "cdouble": "complex128",
                  "chalf": "complex32"}
# torch's dtype names (read without importing torch): a tolerance or dtype naming anything
# else (`float128`, a typo) would never apply, silently.
KNOWN_DTYPES = frozenset((
    "float64", "float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2",
    "float8_e5m2fnuz", "float8_e8m0fnu", "complex32", "complex64", "complex128", "int8", "int16", "int32",
    "int64", "uint8", "uint16", "uint32", "uint64", "bool"))


def dtype_name(key: str) -> str:
    """`torch.float32`, `float32`, `fp32` -> `float32`."""
    name = str(key).strip().removeprefix("torch.")
    return _DTYPE_ALIASES.get(name, name)


def known_dtype(key: str) -> str:
    """The dtype's name (`dtype_name`); ValueError naming the known ones when torch has no such dtype."""
    name = dtype_name(key)
    if name not in KNOWN_DTYPES:
        raise ValueError(f"unknown dtype {key!r}; use a torch dtype name: {', '.join(sorted(KNOWN_DTYPES))}")
    return name


def tolerance_value(value: Any, what: str) -> float:
    """A tolerance as a float; ValueError unless it is a finite number >= 0 (a negative one
    fails every output, NaN and inf pass every output)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{what} must be a number, not {value!r}")
    number = float(value)
    if not (math.isfinite(number) and number >= 0):
        raise ValueError(f"{what} must be a finite number >= 0, not {value!r}")
    return number


def yaml_tolerances(data: dict[str, Any], path: Path) -> dict[str, dict[str, float]]:
    """`tolerance:` (or `tolerances:`) by dtype: `{atol: .., rtol: ..}` or one number for both."""
    raw = data.get("tolerance", data.get("tolerances"))
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise InfrastructureError(f"problem file {path}: `tolerance` must map dtypes to {{atol, rtol}} or a number")
    out: dict[str, dict[str, float]] = {}
    for key, value in raw.items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            atol = rtol = value
        elif isinstance(value, dict) and {"atol", "rtol"} >= set(value) and value:
            atol = value.get("atol", value.get("rtol"))
            rtol = value.get("rtol", value.get("atol"))
        else:
            raise InfrastructureError(f"problem file {path}: tolerance for {key!r} must be a number or "
                                      f"{{atol: .., rtol: ..}}, not {value!r}")
        try:
            out[known_dtype(key)] = {"atol": tolerance_value(atol, "atol"), "rtol": tolerance_value(rtol, "rtol")}
        except ValueError as exc:
            raise InfrastructureError(f"problem error: problem file {path}: tolerance for {key!r}: {exc}; fix "
                                      "the problem's `tolerance:`") from None
    return out


def yaml_ops(data: dict[str, Any], key: str, path: Path) -> list[str]:
    values = data.get(key)
    if values is None:
        return []
    if not isinstance(values, list):
        raise InfrastructureError(f"problem file {path}: `{key}` must be a list of op names")
    return [str(v) for v in values]
