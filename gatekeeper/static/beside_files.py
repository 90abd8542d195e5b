"""Which file beside the submission a path expression names: the way multi-file submissions
point `load(sources=...)` at their `.cu` files. Not a rule file; cpp_sources.py and GK431 read it."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from gatekeeper.static.names import string_value


def beside_file(expr: cst.BaseExpression, constants: Optional[dict[str, list]] = None,
                 bound: Optional[dict[str, str]] = None) -> Optional[str]:
    """The relative name in a path built beside the submission's own file, the way multi-file
    submissions name their sources: `os.path.join(os.path.dirname(__file__), "csrc", "k.cu")`,
    `Path(__file__).parent / "k.cu"`, `str(Path(__file__).with_name("k.cu"))`, also through
    module constants (`_HERE = Path(__file__).resolve().parent`) and a comprehension's variable
    (`bound`). None when the expression does not start from `__file__` or has a part that is
    not a literal."""
    walk = _BesideWalk(constants or {}, bound or {})
    if not walk.visit(expr) or not walk.saw_file or not walk.parts:
        return None
    return "/".join(walk.parts)


class _BesideWalk:
    """beside_file's state. A class, not a closure: a recursive closure is a reference cycle,
    and through the constants it would keep the file's syntax tree for the collector."""

    def __init__(self, constants: dict[str, list], bound: dict[str, str]) -> None:
        self.constants, self.bound = constants, bound
        self.parts: list[str] = []
        self.saw_file = False
        self.seen: set[str] = set()

    def visit(self, e: cst.BaseExpression) -> bool:
        if type(e) is cst.Name:
            if e.value == "__file__":
                self.saw_file = True
                return True
            if e.value in self.bound:  # a comprehension's variable over literal names
                self.parts.append(self.bound[e.value])
                return True
            values = self.constants.get(e.value, [])  # a module constant bound once
            if len(values) == 1 and e.value not in self.seen:
                self.seen.add(e.value)
                return self.visit(values[0])
            return False
        text = string_value(e)
        if text is not None:
            self.parts.append(text)
            return True
        if type(e) is cst.BinaryOperation and type(e.operator) is cst.Divide:
            return self.visit(e.left) and self.visit(e.right)
        if type(e) is cst.Attribute:  # Path(__file__).parent, .resolve().parent
            return e.attr.value in ("parent", "absolute", "resolve") and self.visit(e.value)
        if type(e) is cst.Call:
            func = e.func
            name = func.attr.value if type(func) is cst.Attribute else func.value if type(func) is cst.Name else ""
            if name in ("join", "with_name", "joinpath"):
                head = [func.value] if type(func) is cst.Attribute and name != "join" else []
                return all(self.visit(x) for x in head + [a.value for a in e.args])
            if name in ("dirname", "abspath", "realpath", "Path", "str", "fspath", "resolve", "absolute"):
                inner = [a.value for a in e.args] or ([func.value] if type(func) is cst.Attribute else [])
                return len(inner) == 1 and self.visit(inner[0])
        return False


def comprehension_files(expr: cst.ListComp | cst.GeneratorExp, constants: dict[str, list]) -> list[str]:
    """`[os.path.join(_DIR, f) for f in ("a.cu", "b.cu")]`: each name the comprehension makes
    from a literal list of names (one `for`, no `if`); [] for anything else."""
    loop = expr.for_in
    if loop.inner_for_in is not None or loop.ifs or type(loop.target) is not cst.Name:
        return []
    items = loop.iter
    if type(items) is cst.Name and len(constants.get(items.value, [])) == 1:
        items = constants[items.value][0]
    if type(items) not in (cst.List, cst.Tuple):
        return []
    out: list[str] = []
    for element in items.elements:  # type: ignore[union-attr]
        name = string_value(element.value)
        if name is None:
            return []
        made = beside_file(expr.elt, constants, {loop.target.value: name})
        if made is None and type(expr.elt) is cst.Name and expr.elt.value == loop.target.value:
            made = name  # `[f for f in ("a.cu", "b.cu")]`
        if made is not None:
            out.append(made)
    return out
