"""The module import graph of gatekeeper/ and rules/, read from the AST (nothing is imported).

An edge is one `import`/`from ... import` between two of our modules, of one of three kinds:
*load* when it runs while the importing module loads (module body, class bodies, module-level
if/try), *deferred* when it sits in a function body, *typing* under `if TYPE_CHECKING:` (never
runs; a cycle through it is still a circle in the design, hidden from the interpreter).
Load edges must form no cycle: a cycle there means a module can be seen half-initialised
depending on which one is imported first.

    python scripts/import_graph.py         # summary: modules, edges, cycles of each kind

tests/test_layering.py uses this module for the layering rules.
"""

from __future__ import annotations

import argparse
import ast
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator, Optional

ROOT = Path(__file__).resolve().parent.parent
# Source folder -> the package name it installs as (rules/ is `gatekeeper_rules`, see pyproject.toml).
PACKAGES = {"gatekeeper": ROOT / "gatekeeper", "gatekeeper_rules": ROOT / "rules"}


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    names: tuple[str, ...]  # the names taken by `from target import ...` (empty for `import target`)
    line: int
    kind: str  # "load", "deferred" or "typing"

    @property
    def top_level(self) -> bool:
        return self.kind == "load"


def modules() -> dict[str, Path]:
    """Every module of ours by dotted name."""
    found: dict[str, Path] = {}
    for package, folder in PACKAGES.items():
        for path in sorted(folder.rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join([package, *parts])] = path
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(body: Iterable[ast.AST], kind: str) -> Iterator[tuple[ast.stmt, str]]:
    """(import statement, edge kind) for every import in body, recursively."""
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node, kind
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield from _imports(node.body, "deferred" if kind == "load" else kind)
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            yield from _imports(node.body, "typing")
            yield from _imports(node.orelse, kind)
        else:
            for field in ("body", "orelse", "finalbody", "handlers", "cases"):
                children = getattr(node, field, None)
                if isinstance(children, list):
                    yield from _imports([c for c in children if isinstance(c, ast.AST)], kind)


def _base(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    parts = module.split(".") if is_package else module.split(".")[:-1]
    parts = parts[: len(parts) - (node.level - 1)]
    return ".".join(parts + ([node.module] if node.module else []))


def _ours(name: str, known: dict[str, Path]) -> Optional[str]:
    """The longest prefix of name that is one of our modules."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in known:
            return candidate
    return None


def edges(known: Optional[dict[str, Path]] = None, unparsable: Optional[list[str]] = None) -> list[Edge]:
    """Every import edge; a module that does not parse is left out and named in `unparsable`."""
    known = known if known is not None else modules()
    out: list[Edge] = []
    for module, path in known.items():
        try:
            tree = ast.parse(path.read_text("utf-8"), str(path))
        except SyntaxError as exc:
            if unparsable is not None:
                unparsable.append(f"{path}:{exc.lineno}: {exc.msg}")
            continue
        is_package = path.name == "__init__.py"
        for node, kind in _imports(tree.body, "load"):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    target = _ours(alias.name, known)
                    if target and target != module:
                        out.append(Edge(module, target, (), node.lineno, kind))
                continue
            base = _base(module, is_package, node)
            plain: list[str] = []
            for alias in node.names:
                sub = _ours(f"{base}.{alias.name}", known)
                if sub == f"{base}.{alias.name}":  # `from pkg import submodule`
                    out.append(Edge(module, sub, (), node.lineno, kind))
                else:
                    plain.append(alias.name)
            target = _ours(base, known)
            if plain and target and target != module:
                out.append(Edge(module, target, tuple(plain), node.lineno, kind))
    return out


def private_imports(graph_edges: Iterable[Edge]) -> list[Edge]:
    """Edges that take a `_private` name from another module (dunder names excepted)."""
    return [e for e in graph_edges
            if any(n.startswith("_") and not n.startswith("__") for n in e.names)]


def cycles(graph_edges: Iterable[Edge]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    graph: dict[str, set[str]] = {}
    for e in graph_edges:
        graph.setdefault(e.source, set()).add(e.target)
        graph.setdefault(e.target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0

    def visit(start: str) -> None:  # iterative: the graph is deep enough to worry the recursion limit
        nonlocal counter
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.parse_args(argv)
    known = modules()
    broken: list[str] = []
    all_edges = edges(known, broken)
    for line in broken:
        print(f"does not parse, left out: {line}")
    counts = {k: sum(e.kind == k for e in all_edges) for k in ("load", "deferred", "typing")}
    print(f"{len(known)} modules; import edges: " + ", ".join(f"{n} {k}" for k, n in counts.items()))
    failed = False
    for label, kinds in (("load-time imports", {"load"}), ("load-time and deferred imports", {"load", "deferred"}),
                         ("all imports, TYPE_CHECKING included", {"load", "deferred", "typing"})):
        found = cycles(e for e in all_edges if e.kind in kinds)
        failed = failed or (bool(found) and kinds == {"load"})
        print(f"cycles among {label}: {len(found)}")
        for c in found:
            print("  " + " <-> ".join(c))
    private = private_imports(all_edges)
    print(f"imports of another module's private names: {len(private)}")
    for e in private:
        print(f"  {e.source}:{e.line} takes {', '.join(n for n in e.names if n.startswith('_'))} from {e.target}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
