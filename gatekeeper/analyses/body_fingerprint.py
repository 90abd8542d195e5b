"""A name-independent fingerprint of a function body, for GK403. Not a rule file.

The body is parsed with Python's `ast` (formatting, comments and the docstring vanish),
then names are made positional: parameters (not `self`) and local variables become
`_v0, _v1, ...` in order of first appearance, attributes of `self` become `_s0, ...`,
and names imported at module level become their dotted module path (`F.relu` and
`torch.nn.functional.relu` are the same).
"""

from __future__ import annotations

import ast
import pickle
import threading
from typing import Optional

import libcst as cst

from gatekeeper.static.names import dotted
from gatekeeper.static.positions import pair_statements
from gatekeeper.static.python_ast import on_forget, parse_python


def import_map(module: cst.Module) -> dict[str, str]:
    out: dict[str, str] = {}
    for stmt in module.body:
        if type(stmt) is not cst.SimpleStatementLine:
            continue
        for small in stmt.body:
            if type(small) is cst.Import:
                for alias in small.names:
                    full = dotted(alias.name) or ""
                    if alias.asname is not None and type(alias.asname.name) is cst.Name:
                        out[alias.asname.name.value] = full
                    else:
                        out[full.split(".")[0]] = full.split(".")[0]
            elif type(small) is cst.ImportFrom and small.module is not None and type(small.names) is not cst.ImportStar:
                base = dotted(small.module) or ""
                for alias in small.names:
                    name = dotted(alias.name) or ""
                    local = alias.asname.name.value if alias.asname is not None and type(alias.asname.name) is cst.Name else name
                    out[local] = f"{base}.{name}"
    return out


class _Renamer(ast.NodeTransformer):
    def __init__(self, local: set[str], imports: dict[str, str]) -> None:
        self.local = local
        self.imports = imports
        self.names: dict[str, str] = {}
        self.attrs: dict[str, str] = {}

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        if isinstance(node.value, ast.Name) and node.value.id == "self":
            node.attr = self.attrs.setdefault(node.attr, f"_s{len(self.attrs)}")
            return node
        path = _dotted(node)
        if path is not None:
            root, _, rest = path.partition(".")
            if root in self.imports and root not in self.local:
                return ast.Name(id=f"{self.imports[root]}.{rest}", ctx=node.ctx)
        self.generic_visit(node)
        return node

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id in self.local:
            node.id = self.names.setdefault(node.id, f"_v{len(self.names)}")
        elif node.id in self.imports:
            node.id = self.imports[node.id]
        return node

    def visit_arg(self, node: ast.arg) -> ast.AST:
        node.arg = self.names.setdefault(node.arg, f"_v{len(self.names)}")
        node.annotation = None
        return node


def _dotted(node: ast.AST) -> Optional[str]:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


# Memo by function node: generating and re-parsing the code is most of the cost, and the
# same functions come back (GK403 and own_definitions judge the same methods; a
# reference's methods recur for every submission to that problem). The entry keeps its
# node, so an id is never reused while it is stored; bounded by clearing. Entries for the
# file being checked are dropped when it is done (python_ast.forget): kept, each would hold
# a submission's syntax tree alive for the garbage collector to traverse, file after file.
# Only the references' entries (indexed with shared=False) stay.
_MEMO: dict[int, tuple[cst.FunctionDef, dict[str, str], Optional[tuple[int, str]]]] = {}
_MEMO_LIMIT = 2_000
_MODULES_LIMIT = 8


def fingerprint(function: cst.FunctionDef, imports: dict[str, str]) -> Optional[tuple[int, str]]:
    """(statement count, normalised dump) of the body, or None if it cannot be parsed."""
    hit = _MEMO.get(id(function))
    if hit is not None and hit[0] is function and hit[1] == imports:
        return hit[2]
    found = _fingerprint(function, imports)
    if len(_MEMO) >= _MEMO_LIMIT:
        _MEMO.clear()
    key = id(function)
    _MEMO[key] = (function, dict(imports), found)
    keys = _file_keys()
    if key not in _AST or key in keys:  # not a reference's function: this file's
        keys.add(key)
    return found


# CPython `ast` functions of indexed files, by id of the libcst FunctionDef they pair with:
# taking the body from the file's ast tree (parsed once) avoids generating each function's
# code and parsing it again. Entries keep their libcst node, so an id is never reused.
_AST: dict[int, tuple[cst.FunctionDef, ast.AST]] = {}
_INDEXED: dict[int, cst.Module] = {}
# Keys of _AST, _MEMO and _INDEXED that belong to the file being checked, per thread: a
# thread that finishes its file must not walk (or drop) the keys of another thread's file.
_LOCAL = threading.local()


def _file_keys() -> set[int]:
    keys = getattr(_LOCAL, "keys", None)
    if keys is None:
        keys = _LOCAL.keys = set()
    return keys


def _forget_file() -> None:
    keys = _file_keys()
    for key in keys:
        _AST.pop(key, None)
        _MEMO.pop(key, None)
        _INDEXED.pop(key, None)
    keys.clear()


on_forget(_forget_file)


def index_module(module: cst.Module, text: str, *, shared: bool = True) -> None:
    """Pair the module's functions (top level, in classes and in functions) with the ast
    tree of `text`. `shared`: parse through the per-file cache (the file being checked)."""
    if _INDEXED.get(id(module)) is module or not text:
        return
    if len(_INDEXED) >= _MODULES_LIMIT or len(_AST) >= _MEMO_LIMIT:
        _INDEXED.clear()
        _AST.clear()
    _INDEXED[id(module)] = module
    keys = _file_keys() if shared else None
    if keys is not None:
        keys.add(id(module))
    try:
        tree = parse_python(text) if shared else ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return
    _index_body(module.body, tree.body, keys)


def _index_body(cst_body, ast_body: list[ast.stmt], keys: Optional[set[int]]) -> None:
    pairs = pair_statements(cst_body, ast_body)
    if pairs is None:  # the parsers disagree on the shape: those functions take the slow path
        return
    for stmt, (_, node) in zip(cst_body, pairs):
        if node is None or type(stmt) not in (cst.ClassDef, cst.FunctionDef):
            continue
        if type(stmt) is cst.FunctionDef and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                and stmt.name.value == node.name:
            _AST[id(stmt)] = (stmt, node)
            if keys is not None:
                keys.add(id(stmt))
        elif not (type(stmt) is cst.ClassDef and isinstance(node, ast.ClassDef)):
            continue
        if type(stmt.body) is cst.IndentedBlock:
            _index_body(stmt.body.body, node.body, keys)


def _parsed(function: cst.FunctionDef) -> Optional[ast.AST]:
    hit = _AST.get(id(function))
    if hit is not None and hit[0] is function:
        return hit[1]
    try:
        tree = ast.parse(cst.Module(body=[function.with_changes(decorators=[], leading_lines=[])]).code)
    except (SyntaxError, ValueError, RecursionError):
        return None
    return tree.body[0]


def _fingerprint(function: cst.FunctionDef, imports: dict[str, str]) -> Optional[tuple[int, str]]:
    return fingerprint_ast(_parsed(function), imports)


def import_map_ast(tree: ast.Module) -> dict[str, str]:
    """`import_map` read from CPython's tree (a reference's, whose libcst tree is parsed only
    on demand): the same top-level imports, and a relative `from .m import x` keeps `m.x`
    as libcst's dotted module name does."""
    out: dict[str, str] = {}
    for stmt in tree.body:
        if type(stmt) is ast.Import:
            for alias in stmt.names:
                if alias.asname is not None:
                    out[alias.asname] = alias.name
                else:
                    out[alias.name.split(".")[0]] = alias.name.split(".")[0]
        elif type(stmt) is ast.ImportFrom and stmt.module is not None and stmt.names[0].name != "*":
            for alias in stmt.names:
                out[alias.asname or alias.name] = f"{stmt.module}.{alias.name}"
    return out


# Fingerprints of reference functions read from CPython's tree, by id of the node (kept in the
# entry, so an id is never reused while stored): a reference's methods recur for every
# submission to that problem. Bounded by clearing.
_REFERENCE_MEMO: dict[int, tuple[ast.AST, dict[str, str], Optional[tuple[int, str]]]] = {}


def reference_fingerprint(fn: ast.AST, imports: dict[str, str]) -> Optional[tuple[int, str]]:
    """`fingerprint_ast` of a function of a reference's tree (which lives with its problem),
    memoised."""
    hit = _REFERENCE_MEMO.get(id(fn))
    if hit is not None and hit[0] is fn and hit[1] == imports:
        return hit[2]
    found = fingerprint_ast(fn, imports)
    if len(_REFERENCE_MEMO) >= _MEMO_LIMIT:
        _REFERENCE_MEMO.clear()
    _REFERENCE_MEMO[id(fn)] = (fn, dict(imports), found)
    return found


def fingerprint_ast(fn: Optional[ast.AST], imports: dict[str, str]) -> Optional[tuple[int, str]]:
    """The fingerprint of a CPython `FunctionDef` (what `fingerprint` takes of a libcst one)."""
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    body = pickle.loads(pickle.dumps(fn.body))  # the renamer edits nodes; the file's tree is shared (a copy)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
        body = body[1:]
    if not body:
        return None
    params = [a.arg for a in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs)]
    if fn.args.vararg:
        params.append(fn.args.vararg.arg)
    if fn.args.kwarg:
        params.append(fn.args.kwarg.arg)
    if params and params[0] == "self":
        params = params[1:]
    local = set(params)
    for node in ast.walk(ast.Module(body=body, type_ignores=[])):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            local.add(node.id)
    renamer = _Renamer(local, imports)
    for name in params:
        renamer.names.setdefault(name, f"_v{len(renamer.names)}")
    body = [renamer.visit(stmt) for stmt in body]
    return len(body), ast.dump(ast.Module(body=body, type_ignores=[]), annotate_fields=False)
