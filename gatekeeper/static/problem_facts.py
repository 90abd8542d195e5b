"""What the static rules need to know about the reference problem, read without running it.

The problem's integer constants and the literal sizes in `get_inputs()` are its dimensions.
From them come the numbers a hardcoded kernel bakes in: products of dimensions (16*48 =
768), offsets built from them (768, 1536, 2304 for R = 4), and those divided by a vector
width (768 / 4 = 192 threads of float4). `explain` answers with dimensions and products
only; the offsets and vector counts (`explain_offset`) make almost every tile width "equal"
some size, so the rules ask for them only about a literal already used as an index offset.

A fixed dimension (one size in every declared shape: a head width of 128, a group of 128)
is part of the problem, not a free size: `explain` and `explain_offset` never answer with a
size built from fixed dimensions alone, and `fixed_dim` says which fixed dimension a value
is. docs/writing-rules.md "Problem facts" lists the attributes.
"""

from __future__ import annotations

import ast
import hashlib
import threading
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import combinations
from pathlib import Path
from typing import Optional

import libcst as cst

from gatekeeper.static.collector_pause import collector_paused
from gatekeeper.static.int_arith import fold_int
from gatekeeper.static.validation_pause import node_validation_paused

from gatekeeper.static.walk import subtree
from gatekeeper.errors import InfrastructureError, UsageError
from gatekeeper.path_errors import not_found

_VECTOR_WIDTHS = (2, 4, 8)
_MAX_DIMS = 10
# Below this, a number is too common (loop unrolls, float4, ranks) to call a shape.
MIN_SIGNIFICANT = 17


class LazyTree:
    """The reference's libcst tree, parsed on first use. The facts below are read from
    CPython's `ast` (about 10x faster to parse); only a few analyses need libcst nodes of the
    reference (pasted definitions compared with their original), and a batch loads a
    problem per distinct reference: parsing each with libcst was ~8% of a 1,000-file CLI
    run on 350 references (issue 20 item 8). Shared by the copies `dataclasses.replace`
    makes, so a problem is parsed once; a lock keeps concurrent checks on one tree."""

    def __init__(self, path: str, text: str, module: Optional[cst.Module] = None) -> None:
        self._path, self._text, self._module = path, text, module
        self._lock = threading.Lock()

    def get(self) -> cst.Module:
        if self._module is None:
            with self._lock:
                if self._module is None:
                    self._module = _parse_cst(Path(self._path), self._text)
        return self._module


@dataclass
class ProblemFacts:
    path: str
    sha256: str
    name: str
    tree: ast.Module  # CPython's parse of the reference (see LazyTree for why not libcst's)
    constants: dict[str, int] = field(default_factory=dict)
    dims: set[int] = field(default_factory=set)
    derived: dict[int, str] = field(default_factory=dict)
    exact: dict[int, str] = field(default_factory=dict)  # dimensions and their products only
    dtype: str = "float32"
    # Set by gatekeeper.problem.load_problem: the class the submission defines (`ModelNew`,
    # `Model` for KernelBench-Hard) and the ops the sidecar / problem.yaml forbid and allow.
    entry: str = "ModelNew"
    declared_forbidden: tuple[str, ...] = ()
    declared_allowed: tuple[str, ...] = ()
    text: str = ""  # the file's source, for analyses that parse it with CPython's ast
    # Declared shapes (KernelBench-Hard shapes.py, or the sidecar's [shapes]) and what they hold
    # still, set by gatekeeper.problem.load_problem (see gatekeeper.problem.dimensions).
    declared_shapes: tuple[dict[str, int], ...] = ()  # each: reference constant -> size
    fixed_dims: dict[str, int] = field(default_factory=dict)  # one size in every declared shape
    free_dims: dict[str, tuple[int, ...]] = field(default_factory=dict)  # the sizes it takes
    unknown_dims: tuple[str, ...] = ()  # sized in shapes.py in a way a static read cannot follow
    shapes_unread: Optional[str] = None  # why (part of) the declared shapes needs running shapes.py
    lazy: Optional[LazyTree] = field(default=None, repr=False, compare=False)

    @property
    def module(self) -> cst.Module:
        """The reference's libcst tree, parsed on first use (LazyTree)."""
        if self.lazy is None:
            self.lazy = LazyTree(self.path, self.text)
        return self.lazy.get()

    @property
    def fixed_values(self) -> frozenset[int]:
        """Sizes that only fixed dimensions take: no free dimension, declared shape or other
        module constant of the problem has them."""
        if not self.fixed_dims:
            return frozenset()
        others = {v for name, v in self.constants.items() if name not in self.fixed_dims}
        others.update(v for sizes in self.free_dims.values() for v in sizes)
        return frozenset(v for v in self.fixed_dims.values() if v not in others)

    def fixed_dim(self, value: int) -> Optional[str]:
        """Why `value` is a fixed dimension ("HEAD_DIM = 128, the same in every declared
        shape"), or None when it is not one, or a free size takes the same value."""
        if value not in self.fixed_values:
            return None
        names = " or ".join(name for name, size in self.fixed_dims.items() if size == value)
        return f"{names} = {value}, the same in every declared shape of the problem"

    def explain(self, value: int) -> Optional[str]:
        """Why `value` is one of the problem's sizes (a dimension or a product of them), or None.
        Offsets and vector counts are not here: with enough of them every tile width "is"
        a size; ask `explain_offset` only for a literal already used as an index offset."""
        if value < MIN_SIGNIFICANT or (self.fixed_dims and value in self.fixed_values):
            return None
        return self.exact.get(value)

    def explain_offset(self, value: int) -> Optional[str]:
        """Like `explain`, plus offsets built from the sizes (768, 1536, 2304 for R = 4
        slices of B*D) and sizes counted in 2-, 4- or 8-wide vectors. Computed on first use:
        most submissions never ask (no kernel source, or no number in an offset role)."""
        if value < MIN_SIGNIFICANT or (self.fixed_dims and value in self.fixed_values):
            return None
        if not self.derived:
            self.derived = derive_sizes(sorted(self.dims), self.constants, fixed=self.fixed_values, free=self.free_dims)
        return self.derived.get(value)


def load_problem_facts(path: Path) -> ProblemFacts:
    """Facts about a problem file, cached by path, size and modification time: a batch
    checks thousands of submissions against a handful of problems."""
    try:
        stat = path.stat()
    except OSError:
        raise UsageError(not_found(path, "problem file")) from None
    return _load_cached(str(path), stat.st_size, stat.st_mtime_ns)


@lru_cache(maxsize=64)
def _load_cached(name: str, size: int, mtime_ns: int) -> ProblemFacts:
    path = Path(name)
    try:
        raw = path.read_bytes()
        text = raw.decode("utf-8")
    except OSError as exc:
        raise UsageError(f"cannot read problem file {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise InfrastructureError(f"problem file {path} is not UTF-8 text") from None
    tree, module = _parse_ast(path, text)
    facts = ProblemFacts(
        path=str(path),
        sha256=hashlib.sha256(raw).hexdigest(),
        name=path.stem,
        tree=tree,
        text=text,
        lazy=LazyTree(str(path), text, module),
    )
    _read_constants(tree, facts)
    _read_input_sizes(tree, facts)
    facts.exact = derive_sizes(sorted(facts.dims), facts.constants, derived_relations=False)
    return facts


def _parse_cst(path: Path, text: str) -> cst.Module:
    try:
        # Paused like a submission's parse (stage.py, parse_screen.py): the collector would
        # traverse everything a batch holds at each of the parse's collections (~5% of a
        # 300-file CLI run), and node validation cannot fail on the parser's own nodes.
        with collector_paused(), node_validation_paused():
            return cst.parse_module(text)
    except cst.ParserSyntaxError as exc:
        raise InfrastructureError(
            f"problem file {path} does not parse (line {exc.raw_line}): {exc.message}"
        ) from None


def _parse_ast(path: Path, text: str) -> tuple[ast.Module, Optional[cst.Module]]:
    """CPython's tree of the reference. Where CPython rejects the text, libcst parses it
    first, so a file neither accepts gets libcst's error as before; one that only libcst
    accepts cannot be imported by the stages that run it, and is refused here."""
    try:  # a byte-order mark is no code (libcst skips it; ast.parse of a str rejects it)
        return ast.parse(text[1:] if text.startswith("\ufeff") else text), None
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        _parse_cst(path, text)
        reason = f"line {exc.lineno}: {exc.msg}" if isinstance(exc, SyntaxError) else type(exc).__name__
        raise InfrastructureError(f"problem file {path} does not compile with Python ({reason}); fix the "
                                  "reference so that Python can import it") from None


def _int_constant(node: Optional[ast.AST]) -> Optional[int]:
    """The value of an int literal (not a bool): what libcst's `cst.Integer` holds."""
    if type(node) is ast.Constant and type(node.value) is int:
        return node.value
    return None


def _read_constants(tree: ast.Module, facts: ProblemFacts) -> None:
    for stmt in tree.body:  # top-level `NAME = <int>` and `NAME: T = <int>`, as libcst's top-level lines hold them
        if type(stmt) is ast.Assign and len(stmt.targets) == 1:
            target, value = stmt.targets[0], stmt.value
        elif type(stmt) is ast.AnnAssign and stmt.value is not None:
            target, value = stmt.target, stmt.value
        else:
            continue
        number = fold_int(value, facts.constants)  # `M = 1024 * 2`, `N = M * 2`: sizes too
        if type(target) is ast.Name and number is not None:
            facts.constants[target.id] = number
            if number > 1:
                facts.dims.add(number)
    if "float16" not in facts.text and "half" not in facts.text:
        return  # no such attribute without the text ("bfloat16" holds "float16")
    found: set[str] = set()
    for node in ast.walk(tree):
        if type(node) is ast.Attribute:
            names = [node.attr]
        elif type(node) in (ast.Import, ast.ImportFrom):  # libcst spells `a.half` in imports as an Attribute
            dotted = [a.name for a in node.names] + ([node.module] if type(node) is ast.ImportFrom and node.module else [])
            names = [part for name in dotted for part in name.split(".")[1:]]
        else:
            continue
        found.update(_DTYPES[n] for n in names if n in _DTYPES)
    if len(found) == 1:
        facts.dtype = found.pop()
    elif found:  # several: the last one libcst's walk meets wins, as it always did
        for node in subtree(facts.module):
            if type(node) is cst.Attribute and node.attr.value in _DTYPES:
                facts.dtype = _DTYPES[node.attr.value]


_DTYPES = {"float16": "float16", "half": "float16", "bfloat16": "bfloat16"}


def _read_input_sizes(tree: ast.Module, facts: ProblemFacts) -> None:
    """Literal sizes passed positionally in get_inputs()/get_init_inputs() (not `align=8`):
    call arguments and class bases, libcst's `Arg` nodes without a keyword."""
    for stmt in tree.body:
        if type(stmt) in (ast.FunctionDef, ast.AsyncFunctionDef) and stmt.name in ("get_inputs", "get_init_inputs"):
            for node in ast.walk(stmt):
                args = node.args if type(node) is ast.Call else node.bases if type(node) is ast.ClassDef else ()
                for arg in args:
                    number = _int_constant(arg)
                    if number is not None and number > 1:
                        facts.dims.add(number)


def names_by_value(constants: dict[str, int]) -> dict[int, str]:
    """`batch_size or seq_len` when two constants share a value: either may be the one meant."""
    out: dict[int, list[str]] = {}
    for name, value in constants.items():
        out.setdefault(value, []).append(name)
    return {value: " or ".join(names[:2]) for value, names in out.items()}


def dimension_labels(constants: dict[str, int], free: Optional[dict[str, tuple[int, ...]]] = None) -> dict[int, str]:
    """Size -> the name it is known by: a reference constant's, else the declared-shape key that
    takes it (HEADS = 32 in shapes.py, where the reference says 16), never the bare number."""
    labels = {v: name for name, sizes in (free or {}).items() for v in reversed(sizes)}
    labels.update(names_by_value(constants))
    return labels


def product_text(names: list[str]) -> str:
    """`kernel_size*(batch_size or in_channels)`: a factor that is one of several names of a
    size is bracketed, or the product reads as something else."""
    return "*".join(f"({n})" if " or " in n else n for n in names)


def derive_sizes(dims: list[int], constants: dict[str, int], derived_relations: bool = True,
                 fixed: frozenset[int] = frozenset(),
                 free: Optional[dict[str, tuple[int, ...]]] = None) -> dict[int, str]:
    """Sizes explained by the dimensions `dims`; `fixed` dimensions explain a size only
    together with a free one (HEADS*HEAD_DIM is a free size, HEAD_DIM alone is not). `free`:
    the declared shapes' free dimensions, which name sizes no reference constant has."""
    names = dimension_labels(constants, free)
    nominal = set(constants.values())
    label = lambda d: names.get(d, str(d))  # noqa: E731
    dims = dims[:_MAX_DIMS]
    derived: dict[int, str] = {}
    for d in dims:
        if d not in fixed:
            where = " in a declared shape" if d not in nominal and d in names else ""
            derived.setdefault(d, f"the problem dimension {label(d)} = {d}{where}")
    products: list[tuple[int, str, list[int]]] = []
    for size in range(2, len(dims) + 1):
        for combo in combinations(dims, size):
            if fixed and all(d in fixed for d in combo):
                continue
            product = 1
            for d in combo:
                product *= d
            if not derived_relations:  # the text only for a new size (up to 1,013 combinations a problem)
                if product not in derived:
                    derived[product] = f"{product_text([label(d) for d in combo])} = {product}"
                continue
            expr = product_text([label(d) for d in combo])
            products.append((product, expr, [d for d in dims if d not in combo]))
            derived.setdefault(product, f"{expr} = {product}")
    if not derived_relations:
        return derived
    # Simplest explanation first: products, then offsets, then vector counts.
    for k in range(2, 64):
        for product, expr, rest in products:
            for outer in rest:
                if k < outer and k * product not in derived:  # build the text only when new
                    derived[k * product] = f"{k}*({expr}) = {k * product}, an offset into {label(outer)} slices"
    for product, expr, _ in [(d, label(d), []) for d in dims if d not in fixed] + products:
        for width in _VECTOR_WIDTHS:
            if product % width == 0:
                derived.setdefault(product // width, f"({expr})/{width} = {product // width}, the size in {width}-wide vectors")
    return derived
