"""Submission bytes are read as Python reads a module (PEP 263): a declared latin-1 file is
text; undecodable bytes and syntax errors are shown at line:column with the line and a caret
(issue 21, item 10). Real files through the real static stage."""

from __future__ import annotations

from pathlib import Path

import gatekeeper
from gatekeeper.static.source_text import Undecodable, decode_source

ROOT = Path(__file__).resolve().parent.parent
PROBLEM = ROOT / "fixtures" / "problems" / "seed_mean.py"
BODY = 'import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x.clone()\n'


def _rules(path: Path) -> dict:
    report = gatekeeper.check_static(path, PROBLEM)
    return {f.rule: f for f in report.findings}


def test_a_declared_latin1_file_is_text(tmp_path):
    path = tmp_path / "k.py"
    path.write_bytes(("# -*- coding: latin-1 -*-\n# caf\u00e9\n" + BODY).encode("latin-1"))
    compile(path.read_bytes(), str(path), "exec")  # Python itself reads it
    assert "GK001" not in _rules(path)
    assert decode_source(path.read_bytes()).startswith("# -*- coding: latin-1")


def test_undeclared_latin1_is_reported_at_line_and_column(tmp_path):
    path = tmp_path / "k.py"
    path.write_bytes((BODY + 'NAME = "caf\u00e9"\n').encode("latin-1"))
    finding = _rules(path)["GK001"]
    assert (finding.location.line, finding.location.column) == (5, 12)
    assert "Line 5, column 12" in finding.message and "coding: latin-1" in finding.message
    assert finding.evidence["source_line"].startswith('NAME = "caf')


def test_a_bad_declaration_is_not_text():
    found = decode_source(b"# -*- coding: no-such-codec -*-\nx = 1\n")
    assert isinstance(found, Undecodable) and "encoding declaration" in found.detail


def test_a_byte_order_mark_is_dropped():
    assert decode_source(b"\xef\xbb\xbfx = 1\n") == "x = 1\n"


def test_syntax_errors_carry_the_line_for_the_caret(tmp_path):
    path = tmp_path / "k.py"
    path.write_text(BODY.replace("def forward(self, x):", "def forward(self, x:"))
    finding = _rules(path)["GK003"]
    assert finding.location.line == 3 and finding.evidence["source_line"] == "    def forward(self, x:"
