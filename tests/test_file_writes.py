"""GK442's severities for writes under the system temp dir: the submission's own build
inputs compiled with `load(sources=...)` are a warning; anything else written there by a
literal path stays an error."""

from __future__ import annotations

from gatekeeper.report import Severity
from gatekeeper.static.testing import static_findings

_BUILD = """import os
from torch.utils.cpp_extension import load
os.makedirs('/tmp/my_ext', exist_ok=True)
with open('/tmp/my_ext/kernel.cu', 'w') as f:
    f.write('// kernel')
ext = load(name='my_ext', sources=['/tmp/my_ext/kernel.cu'])
"""


def _gk442(source: str) -> list:
    return [f for f in static_findings(source, None) if f.rule == "GK442"]


def test_own_build_sources_under_tmp_compiled_with_load_are_warnings():
    found = _gk442(_BUILD)
    assert [f.location.line for f in found] == [3, 4]
    assert all(f.severity == Severity.WARNING for f in found), found


def test_the_same_writes_without_a_build_are_errors():
    found = _gk442(_BUILD.replace("ext = load(name='my_ext', sources=['/tmp/my_ext/kernel.cu'])\n", ""))
    assert found and all(f.severity == Severity.ERROR for f in found), found


def test_a_result_file_under_tmp_stays_an_error_even_with_a_build():
    source = _BUILD + "open('/tmp/my_ext/result.json', 'w').write('{\"speedup\": 9}')\n"
    found = [f for f in _gk442(source) if f.location.line == 7]
    assert found and found[0].severity == Severity.ERROR, _gk442(source)
