"""One `Problem`, loaded once per check and handed to every stage.

It holds the format (KernelBench, the seed's, KernelBench-Hard), the files, the reference's
source, the sidecar merged with `problem.yaml`, the canonical shapes, and the facts the
static rules read. The later stages send its path, format and settings to their workers,
which import the reference file in their own process.

Load errors are raised here, once: a missing or unreadable path is a usage error (exit 2),
a problem that does not parse or whose side files are invalid is a problem error (exit 3).
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Optional

from gatekeeper.errors import InfrastructureError, UsageError
from gatekeeper.problem.dimensions import classify
from gatekeeper.problem.formats import (
    DEFAULT_TOLERANCES, ENTRY, Located, ProblemFormat, locate, read_yaml, text_format, yaml_ops, yaml_tolerances,
)
from gatekeeper.problem.shapes_file import DeclaredShapes, read_shapes_file, shapes_from_value
from gatekeeper.problem.sidecar import Sidecar, SidecarShapes, Tolerance, load_sidecar, sidecar_path
from gatekeeper.report import ProblemRef
from gatekeeper.static.problem_facts import ProblemFacts, derive_sizes, load_problem_facts

DEFAULT_JITTER_NAMES = ("popcorn_pri",)


@dataclass(frozen=True)
class Problem:
    format: ProblemFormat
    path: Path  # the reference module (reference.py in a KernelBench-Hard folder)
    source: str
    sha256: str
    name: str
    sidecar: Sidecar  # the sidecar TOML merged with problem.yaml (tolerances, forbidden ops)
    facts: ProblemFacts  # what the static rules read
    shapes: tuple[dict[str, int], ...] = ()  # canonical shapes (shapes.py), by reference constant
    folder: Optional[Path] = None
    shapes_file: Optional[Path] = None  # KernelBench-Hard's shapes.py
    # Why the declared shapes were not all read statically (None: they were); the stages that run
    # code read them in the sandboxed worker (gatekeeper.problem.shapes_worker.resolve_shapes).
    shapes_unread: Optional[str] = None
    fixed_by_sidecar: tuple[str, ...] = ()  # the sidecar file's own `[shapes] fixed`

    @property
    def entry(self) -> str:
        """The class the submission defines: `ModelNew`, or `Model` in KernelBench-Hard."""
        return ENTRY[self.format]

    def tolerance(self, dtype: str) -> tuple[float, float]:
        """(atol, rtol): the sidecar's or problem.yaml's, else the format's own default."""
        if dtype in self.sidecar.tolerances:
            given = self.sidecar.tolerances[dtype]
            return given.atol, given.rtol
        return DEFAULT_TOLERANCES[self.format].get(dtype, (0.0, 0.0))

    def ref(self) -> ProblemRef:
        return ProblemRef(path=str(self.folder or self.path), sha256=self.sha256, name=self.name)

    def describe(self) -> dict[str, object]:
        """What workers need besides the path (JSON)."""
        return {"problem": str(self.path.resolve()), "format": self.format.value, "entry": self.entry}


def load_problem(path: Path, jitter_names: tuple[str, ...] = DEFAULT_JITTER_NAMES) -> Problem:
    """The problem at `path` (a file, or a KernelBench-Hard folder), cached by the paths,
    sizes and modification times of every file it reads: a batch checks thousands of
    submissions against a handful of problems."""
    located = locate(Path(path))
    stamps = tuple(_stamp(p) for p in (located.reference, sidecar_path(located.reference), located.yaml,
                                        located.shapes))
    return _load(located, stamps, tuple(jitter_names))


def _stamp(path: Optional[Path]) -> tuple[str, int, int]:
    if path is None:
        return ("", 0, 0)
    try:
        st = path.stat()
    except OSError:
        return (str(path), -1, -1)
    return (str(path), st.st_size, st.st_mtime_ns)


@lru_cache(maxsize=64)
def _load(located: Located, stamps: tuple, jitter_names: tuple[str, ...]) -> Problem:
    facts = load_problem_facts(located.reference)
    try:
        raw = located.reference.read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read problem file {located.reference}: {exc.strerror}") from None
    source = raw.decode("utf-8-sig")
    fmt = located.format
    if fmt == ProblemFormat.KERNELBENCH:
        fmt = text_format(source, list(jitter_names))
    sidecar = load_sidecar(located.reference)
    if located.yaml is not None:
        sidecar = _merge_yaml(sidecar, located.yaml)
    if located.shapes is not None:
        declared = read_shapes_file(located.shapes, facts.constants)
    else:  # the sidecar's [shapes] declared, for KernelBench files (none: no declared shapes)
        declared = shapes_from_value(list(sidecar.shapes.declared), facts.constants,
                                     str(sidecar_path(located.reference)))
    name = located.folder.name if located.folder is not None else located.reference.stem
    problem = Problem(format=fmt, path=located.reference, source=source, sha256=hashlib.sha256(raw).hexdigest(),
                      name=name, sidecar=sidecar, facts=facts, folder=located.folder, shapes_file=located.shapes,
                      fixed_by_sidecar=tuple(sidecar.shapes.fixed))
    return with_shapes(problem, declared, ENTRY[fmt])


def with_shapes(problem: Problem, declared: DeclaredShapes, entry: Optional[str] = None) -> Problem:
    """`problem` with its declared shapes (read statically, or by the worker) on the Problem,
    its facts (fixed and free dimensions) and its sidecar (fixed dimensions are not jittered)."""
    constants = problem.facts.constants
    dims = classify(declared.shapes, constants, declared.unknown, problem.fixed_by_sidecar,
                    where=str(sidecar_path(problem.path)), jittered=problem.sidecar.jitter.ranges)
    fixed = list(dims.fixed)  # the merged sidecar carries them to the jitter planner
    sidecar = problem.sidecar.model_copy(update={"shapes": SidecarShapes(
        fixed=fixed, declared=list(problem.sidecar.shapes.declared))})
    facts = _with_problem(problem.facts, entry or problem.facts.entry, sidecar, list(declared.shapes))
    facts.declared_shapes, facts.fixed_dims, facts.free_dims = declared.shapes, dims.fixed, dims.free
    facts.unknown_dims, facts.shapes_unread = dims.unknown, declared.unread
    facts.exact = derive_sizes(sorted(facts.dims), constants, derived_relations=False, fixed=facts.fixed_values,
                               free=facts.free_dims)
    return dataclasses.replace(problem, sidecar=sidecar, facts=facts, shapes=declared.shapes,
                               shapes_unread=declared.unread)


REQUIRED = ("Model", "get_inputs", "get_init_inputs")


def require_names(problem: Problem) -> None:
    """Raise a problem error (exit 3) when the problem never binds `Model`, `get_inputs` or
    `get_init_inputs`: every check against it would be meaningless. Read statically (the
    CLI's --static-only runs no problem code), so a problem that raises at import is found
    by the stages that import it."""
    if _bound_at_top(problem.facts.tree):
        return  # every REQUIRED name has a top-level def, class or assignment: the walk below would agree
    missing = _missing_names(problem.facts.text)
    if missing:
        raise InfrastructureError(f"problem error: {problem.path} defines no {', '.join(missing)} (a "
                                  f"{problem.format.value} problem defines {', '.join(REQUIRED)}); fix the problem "
                                  "file (every check against it would be meaningless)")


def _bound_at_top(tree: ast.Module) -> bool:
    """Whether the reference binds every REQUIRED name with a top-level `def`, `class` or
    `NAME = ...`: each is a binding `_missing_names` finds too, so its walk of the whole
    tree is needed only when this says no."""
    bound: set[str] = set()
    for stmt in tree.body:
        if type(stmt) in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef):
            bound.add(stmt.name)
        elif type(stmt) is ast.Assign:
            bound.update(t.id for t in stmt.targets if type(t) is ast.Name)
    return all(name in bound for name in REQUIRED)


@lru_cache(maxsize=64)
def _missing_names(text: str) -> tuple[str, ...]:
    """The REQUIRED names the text never binds. Cached by text: a run checks many submissions
    against one problem, and this parse was per submission (issue 20 item 8)."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return ()  # libcst parsed it; CPython's own error surfaces in the stages that import it
    bound: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            bound.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            if any(alias.name == "*" for alias in node.names):
                return ()  # `from x import *` may bind anything
            bound.update(alias.asname or alias.name.split(".")[0] for alias in node.names)
    return tuple(name for name in REQUIRED if name not in bound)


def _merge_yaml(sidecar: Sidecar, path: Path) -> Sidecar:
    """problem.yaml's tolerances and forbidden ops; the sidecar TOML wins where both say."""
    data = read_yaml(path)
    tolerances = {k: Tolerance(**v) for k, v in yaml_tolerances(data, path).items()}
    tolerances.update(sidecar.tolerances)
    forbidden = list(dict.fromkeys(sidecar.forbidden + yaml_ops(data, "forbidden", path)))
    allowed = list(dict.fromkeys(sidecar.allowed_ops + yaml_ops(data, "allowed", path)))
    return sidecar.model_copy(update={"tolerances": tolerances, "forbidden": forbidden, "allowed_ops": allowed})


def _with_problem(facts: ProblemFacts, entry: str, sidecar: Sidecar, shapes: list[dict[str, int]]) -> ProblemFacts:
    """The static facts plus what the Problem knows: the entry class, the declared ops, and
    every canonical shape's sizes (a kernel that bakes in any of them is hardcoded)."""
    dims = set(facts.dims)
    for shape in shapes:
        dims.update(v for v in shape.values() if v > 1)
    copy = dataclasses.replace(facts, dims=dims, derived={}, entry=entry,
                               declared_forbidden=tuple(sidecar.forbidden), declared_allowed=tuple(sidecar.allowed_ops))
    return copy  # `exact` is derived by with_shapes, once the fixed dimensions are known
