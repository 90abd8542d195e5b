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

import hashlib
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import combinations
from pathlib import Path
from typing import Optional

import libcst as cst

from gatekeeper.static.collector_pause import collector_paused
from gatekeeper.static.names import int_value
from gatekeeper.static.validation_pause import node_validation_paused

from gatekeeper.static.walk import subtree
from gatekeeper.errors import InfrastructureError, UsageError
from gatekeeper.path_errors import not_found

_VECTOR_WIDTHS = (2, 4, 8)
_MAX_DIMS = 10
# Below this, a number is too common (loop unrolls, float4, ranks) to call a shape.
MIN_SIGNIFICANT = 17


@dataclass
class ProblemFacts:
    path: str
    sha256: str
    name: str
    module: cst.Module
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
            self.derived = derive_sizes(sorted(self.dims), self.constants, fixed=self.fixed_values)
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
    try:
        # Paused like a submission's parse (stage.py, parse_screen.py): the collector would
        # traverse everything a batch holds at each of the parse's collections (~5% of a
        # 300-file CLI run), and node validation cannot fail on the parser's own nodes.
        with collector_paused(), node_validation_paused():
            module = cst.parse_module(text)
    except cst.ParserSyntaxError as exc:
        raise InfrastructureError(
            f"problem file {path} does not parse (line {exc.raw_line}): {exc.message}"
        ) from None
    facts = ProblemFacts(
        path=str(path),
        sha256=hashlib.sha256(raw).hexdigest(),
        name=path.stem,
        module=module,
        text=text,
    )
    _read_constants(module, facts)
    _read_input_sizes(module, facts)
    facts.exact = derive_sizes(sorted(facts.dims), facts.constants, derived_relations=False)
    return facts


def _read_constants(module: cst.Module, facts: ProblemFacts) -> None:
    for stmt in module.body:
        if type(stmt) is not cst.SimpleStatementLine:
            continue
        for small in stmt.body:
            if type(small) is cst.Assign and len(small.targets) == 1:
                target, value = small.targets[0].target, small.value
            elif type(small) is cst.AnnAssign and small.value is not None:
                target, value = small.target, small.value
            else:
                continue
            if type(target) is cst.Name and type(value) is cst.Integer:
                number = int_value(value)
                if number is None:
                    continue
                facts.constants[target.value] = number
                if number > 1:
                    facts.dims.add(number)
    if "float16" not in facts.text and "half" not in facts.text:
        return  # libcst keeps identifiers as spelled: no such attribute without the text ("bfloat16" holds "float16")
    for node in _walk(module):
        if type(node) is cst.Attribute and node.attr.value in ("float16", "half", "bfloat16"):
            facts.dtype = "float16" if node.attr.value != "bfloat16" else "bfloat16"


def _read_input_sizes(module: cst.Module, facts: ProblemFacts) -> None:
    """Literal sizes passed positionally in get_inputs()/get_init_inputs() (not `align=8`)."""
    for stmt in module.body:
        if type(stmt) is cst.FunctionDef and stmt.name.value in ("get_inputs", "get_init_inputs"):
            for node in _walk(stmt):
                if type(node) is cst.Arg and node.keyword is None and type(node.value) is cst.Integer:
                    number = int_value(node.value)
                    if number is not None and number > 1:
                        facts.dims.add(number)


def _walk(node: cst.CSTNode):
    return subtree(node)


def names_by_value(constants: dict[str, int]) -> dict[int, str]:
    """`batch_size or seq_len` when two constants share a value: either may be the one meant."""
    out: dict[int, list[str]] = {}
    for name, value in constants.items():
        out.setdefault(value, []).append(name)
    return {value: " or ".join(names[:2]) for value, names in out.items()}


def derive_sizes(dims: list[int], constants: dict[str, int], derived_relations: bool = True,
                 fixed: frozenset[int] = frozenset()) -> dict[int, str]:
    """Sizes explained by the dimensions `dims`; `fixed` dimensions explain a size only
    together with a free one (HEADS*HEAD_DIM is a free size, HEAD_DIM alone is not)."""
    names = names_by_value(constants)
    label = lambda d: names.get(d, str(d))  # noqa: E731
    dims = dims[:_MAX_DIMS]
    derived: dict[int, str] = {}
    for d in dims:
        if d not in fixed:
            derived.setdefault(d, f"the problem dimension {label(d)} = {d}")
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
                    derived[product] = f"{'*'.join(label(d) for d in combo)} = {product}"
                continue
            expr = "*".join(label(d) for d in combo)
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
