"""Which problem inputs are integer metadata, and which submission parameters receive them
(gatekeeper/analyses/integer_inputs.py, used by GK540)."""

import libcst as cst

from gatekeeper.analyses.integer_inputs import integer_input_positions, integer_parameters

PROBLEM = """
import torch
def get_inputs():
    idx = torch.arange(10).long()
    return [torch.randn(4, 8), torch.randint(1, 9, (4,), dtype=torch.int32), idx,
            torch.randint(0, 5, (4, 8)).float(), torch.zeros(4, dtype=torch.long), torch.rand(4)]
"""


def test_integer_inputs_are_read_from_get_inputs():
    # randint, arange through a local, an integer dtype; not a randint cast to float
    assert integer_input_positions(cst.parse_module(PROBLEM)) == frozenset({1, 2, 4})


def test_parameters_that_receive_them_are_followed_into_helpers():
    module = cst.parse_module(
        "def _inner(a, n):\n    return n\n"
        "def _launch(x, lens, out=None):\n    return _inner(x, lens.contiguous())\n"
        "def _unrelated(x, lens):\n    return lens\n"
        "class ModelNew:\n    def forward(self, x, lengths):\n        return _launch(x, lengths)\n")
    found = integer_parameters(module, "ModelNew", frozenset({1}))
    by_name = {}
    for stmt in module.body:
        if isinstance(stmt, cst.FunctionDef):
            by_name[stmt.name.value] = found.get(id(stmt), set())
        elif isinstance(stmt, cst.ClassDef):
            by_name["forward"] = found.get(id(stmt.body.body[0]), set())
    assert by_name == {"forward": {"lengths"}, "_launch": {"lens"}, "_inner": {"n"}, "_unrelated": set()}
    # a problem without integer inputs gives nothing
    assert integer_parameters(module, "ModelNew", frozenset()) == {}
