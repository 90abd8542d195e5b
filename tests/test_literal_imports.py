"""`importlib.import_module` with a name written in the source (GK431, gatekeeper.static.names):
a version-compatibility lookup of triton's libdevice is no hidden import, and the bound name is
that module for every other rule, so torch reached through it is still torch."""

from __future__ import annotations

from pathlib import Path

from gatekeeper.static.testing import static_findings

ROOT = Path(__file__).resolve().parent.parent
PROBLEM = ROOT / "fixtures/problems/cpu_matmul.py"

HEADER = "import importlib\nimport torch\nimport torch.nn as nn\n"


def _by_rule(source: str) -> dict[str, list]:
    out: dict[str, list] = {}
    for finding in static_findings(source, PROBLEM.read_text("utf-8")):
        out.setdefault(finding.rule, []).append(finding)
    return out


def test_a_literal_triton_module_is_a_warning_and_a_literal_reference_an_error():
    found = _by_rule(HEADER + 'libdevice = importlib.import_module("triton.language.extra.libdevice")\n')
    assert [f.severity.value for f in found["GK431"]] == ["warning"]
    assert "`triton.language.extra.libdevice`" in found["GK431"][0].message
    found = _by_rule(HEADER + 'ref = importlib.import_module("reference")\n')
    assert [f.severity.value for f in found["GK431"]] == ["error"]


def test_a_loop_over_literal_names_is_a_warning_and_a_computed_name_an_error():
    loop = ('for name in ("triton.language.extra.libdevice", "triton.language.math"):\n'
            '    try:\n        lib = importlib.import_module(name)\n        break\n'
            '    except ImportError:\n        continue\n')
    assert [f.severity.value for f in _by_rule(HEADER + loop)["GK431"]] == ["warning"]
    computed = loop.replace('"triton.language.math"', '"sub" + "process"')
    assert [f.severity.value for f in _by_rule(HEADER + computed)["GK431"]] == ["error"]


def test_torch_reached_through_a_literal_import_is_torch():
    source = HEADER + (
        'tm = importlib.import_module("torch")\n'
        "class ModelNew(nn.Module):\n"
        "    def forward(self, a, b):\n"
        "        return tm.matmul(a, b)\n")
    found = _by_rule(source)
    assert "GK301" in found or "GK302" in found, sorted(found)
    assert any("matmul" in f.message for f in found.get("GK301", []) + found.get("GK302", []))
