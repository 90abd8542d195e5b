"""Layering: the import graph of gatekeeper/ and rules/, read from the AST by
scripts/import_graph.py, has no circles and keeps each layer to its own side."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
import import_graph  # noqa: E402

STAGES = ("gatekeeper.build", "gatekeeper.behaviour", "gatekeeper.timing")
# Cycles that only TYPE_CHECKING imports close: none is left, and none may be added.
KNOWN_TYPING_CYCLES: list[list[str]] = []


@pytest.fixture(scope="module")
def edges() -> list[import_graph.Edge]:
    broken: list[str] = []
    found = import_graph.edges(unparsable=broken)
    assert broken == [], "modules the graph cannot read"
    return found


def _inside(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def _show(found: list[import_graph.Edge]) -> str:
    return "\n".join(f"{e.source}:{e.line} imports {e.target} {list(e.names) or ''}" for e in found)


def test_graph_sees_the_whole_tree(edges):
    # A graph that missed a package would pass every test below; these edges exist today.
    pairs = {(e.source, e.target) for e in edges}
    assert ("gatekeeper.pipeline", "gatekeeper.stages") in pairs
    assert any(_inside(s, "gatekeeper_rules") and _inside(t, "gatekeeper.analyses") for s, t in pairs)
    assert any(e.kind == "deferred" for e in edges) and any(e.kind == "typing" for e in edges)


def test_cycle_finder_finds_a_cycle():
    a, b, c = "m.a", "m.b", "m.c"
    made = [import_graph.Edge(a, b, (), 1, "load"), import_graph.Edge(b, c, (), 1, "load"),
            import_graph.Edge(c, a, (), 1, "load")]
    assert import_graph.cycles(made) == [[a, b, c]]
    assert import_graph.cycles(made[:2]) == []


def test_no_cycles_among_load_time_imports(edges):
    assert import_graph.cycles(e for e in edges if e.kind == "load") == []


def test_no_cycles_counting_deferred_imports(edges):
    assert import_graph.cycles(e for e in edges if e.kind in ("load", "deferred")) == []


def test_no_new_cycles_through_type_checking_imports(edges):
    found = import_graph.cycles(edges)
    new = [c for c in found if c not in KNOWN_TYPING_CYCLES]
    assert new == [], f"import circles closed by TYPE_CHECKING imports: {new}"


def test_stages_do_not_import_the_pipeline(edges):
    found = [e for e in edges if any(_inside(e.source, s) for s in STAGES) and e.target == "gatekeeper.pipeline"]
    assert found == [], "stages take their contract from gatekeeper.stages:\n" + _show(found)


def test_build_does_not_import_the_behaviour_stage(edges):
    found = [e for e in edges if _inside(e.source, "gatekeeper.build") and _inside(e.target, "gatekeeper.behaviour")]
    assert found == [], "shared run-time pieces live in gatekeeper.runtime:\n" + _show(found)


# Imports of another module's private names that are tolerated: none. Export the name instead.
KNOWN_PRIVATE: set[tuple[str, str]] = set()


def test_stages_do_not_import_private_names(edges):
    found = [e for e in import_graph.private_imports(edges)
             if (any(_inside(e.source, s) for s in STAGES) or any(_inside(e.target, s) for s in STAGES))
             and (e.source, e.target) not in KNOWN_PRIVATE]
    assert found == [], _show(found)


def test_analyses_do_not_import_each_others_private_names(edges):
    found = [e for e in import_graph.private_imports(edges) if _inside(e.target, "gatekeeper.analyses")]
    assert found == [], _show(found)


def test_rules_import_only_gatekeeper(edges):
    # A rule never imports another rule: what two rules share is an analysis in gatekeeper/.
    found = [e for e in edges if _inside(e.source, "gatekeeper_rules") and _inside(e.target, "gatekeeper_rules")]
    assert found == [], _show(found)


def test_gatekeeper_does_not_import_a_rule_module(edges):
    # The engine finds rules by discovery; importing one by name would load it a second way.
    found = [e for e in edges if _inside(e.source, "gatekeeper") and _inside(e.target, "gatekeeper_rules")
             and e.target != "gatekeeper_rules"]
    assert found == [], _show(found)


LOWER = ("gatekeeper.static", "gatekeeper.analyses", "gatekeeper_rules")
RUN_TIME = ("gatekeeper.build", "gatekeeper.behaviour", "gatekeeper.timing", "gatekeeper.runtime")
SURFACES = ("gatekeeper.pipeline", "gatekeeper.api", "gatekeeper.cli", "gatekeeper.cli_check", "gatekeeper.cli_docs",
            "gatekeeper.ingest", "gatekeeper.agent", "gatekeeper.render")


def _crossing(edges, sources, targets):
    return [e for e in edges if any(_inside(e.source, s) for s in sources) and any(_inside(e.target, t) for t in targets)]


def test_static_layer_does_not_import_run_time_stages_or_surfaces(edges):
    found = _crossing(edges, LOWER, RUN_TIME + SURFACES)
    assert found == [], _show(found)


def test_stages_and_sandbox_do_not_import_surfaces(edges):
    below = LOWER + RUN_TIME + ("gatekeeper.sandbox", "gatekeeper.problem", "gatekeeper.stages")
    found = _crossing(edges, below, SURFACES)
    assert found == [], _show(found)


def test_sandbox_does_not_import_the_stages(edges):
    found = _crossing(edges, ("gatekeeper.sandbox",), LOWER + RUN_TIME)
    assert found == [], _show(found)


MAX_LINES = 420  # "no module over about 400 lines" (issue 14)


def test_no_module_over_the_size_limit():
    sizes = {name: len(path.read_text("utf-8").splitlines()) for name, path in import_graph.modules().items()}
    over = sorted((n, name) for name, n in sizes.items() if n > MAX_LINES)
    assert over == [], f"split these along a real seam: {over}"
