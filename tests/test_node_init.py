"""libcst nodes built through gatekeeper's slot-storing constructors (static/node_init.py,
issue 20 item 8) are the nodes libcst's own constructors build: whole trees of the fixtures
compared against a subprocess that never installs them, every node class's defaults and
default factories, frozen instances, and validation outside a pause."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import libcst as cst
import pytest

from gatekeeper.static import node_init
from gatekeeper.static.validation_pause import node_validation_paused

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted((ROOT / "fixtures" / "submissions").rglob("*.py"))[:80] + sorted((ROOT / "fixtures" / "problems").glob("*.py"))

_DUMP = """
import json, sys, libcst
out = []
for path in sys.argv[1:]:
    try:
        out.append(repr(libcst.parse_module(open(path, encoding="utf-8").read())))
    except Exception as exc:
        out.append(type(exc).__name__)
print(json.dumps(out))
"""


def test_trees_equal_those_of_libcsts_own_constructors():
    assert SOURCES
    pristine = json.loads(subprocess.run([sys.executable, "-c", _DUMP, *map(str, SOURCES)], check=True,
                                         capture_output=True, text=True).stdout)
    node_init.install_fast_node_inits()
    assert cst.Name.__init__.__code__.co_filename == node_init.FILENAME
    mine = []
    for path in SOURCES:
        try:
            with node_validation_paused():
                mine.append(repr(cst.parse_module(path.read_text("utf-8"))))
        except Exception as exc:  # noqa: BLE001 - compared with the subprocess's outcome
            mine.append(type(exc).__name__)
    assert mine == pristine  # repr lists every field of every node


def test_every_slotted_node_class_is_switched_with_its_defaults():
    node_init.install_fast_node_inits()
    classes = [c for c in node_init._node_classes() if "__slots__" in c.__dict__ and "__init__" in c.__dict__
               and dataclasses.is_dataclass(c)]
    assert len(classes) > 150
    for cls in classes:
        assert cls.__init__.__code__.co_filename == node_init.FILENAME, cls
        fields = dataclasses.fields(cls)
        if any(f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING for f in fields):
            continue  # needs arguments: covered by the parsed trees
        node = cls()
        for f in fields:
            want = f.default if f.default is not dataclasses.MISSING else f.default_factory()
            got = getattr(node, f.name)
            same = got.deep_equals(want) if isinstance(got, cst.CSTNode) else got == want  # nodes compare by identity
            assert same, (cls, f.name)


def test_nodes_stay_frozen_and_validated_outside_a_pause():
    node_init.install_fast_node_inits()
    with pytest.raises(dataclasses.FrozenInstanceError):
        cst.Name("x").value = "y"  # type: ignore[misc]
    with pytest.raises(cst.CSTValidationError):
        cst.Name("not a name")
    node = cst.Call(cst.Name("f"), args=[cst.Arg(cst.Integer("1"))])
    assert cst.Module(body=[cst.SimpleStatementLine([cst.Expr(node)])]).code == "f(1)\n"
    assert node.with_changes(func=cst.Name("g")).func.value == "g"


def test_a_class_that_does_not_qualify_is_left_alone():
    @dataclasses.dataclass(frozen=True)
    class WithInitVar(cst.CSTNode):  # an InitVar is a parameter without a slot
        value: str
        extra: dataclasses.InitVar[int] = 0

        def _visit_and_replace_children(self, visitor):  # pragma: no cover - never visited
            return self

        def _codegen_impl(self, state):  # pragma: no cover
            pass

    assert node_init.fast_init(WithInitVar) is None
    assert node_init.fast_init(type("Plain", (cst.Name,), {})) is None  # inherits its constructor
