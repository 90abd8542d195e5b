"""Problem loading pieces that run in the parent: sidecar, jitter, implicit constants, plan."""

import random

import libcst as cst
import pytest

from gatekeeper.errors import InfrastructureError
from gatekeeper.problem.implicit import choose_constants, jitter_source, sizing_constants
from gatekeeper.problem.jitter import Jitter, JitterSpec, jitter_value
from gatekeeper.problem.plan import plan_trials
from gatekeeper.problem.sidecar import Sidecar, load_sidecar

KB = """
import torch
batch_size = 16
dim = 4096
hidden = dim * 2
kernel = 3
unrelated = 1000
def get_inputs():
    return [torch.randn(batch_size, hidden)]
def get_init_inputs():
    return [kernel]
"""


def test_sizing_constants_follow_derived_names_and_skip_unused():
    found = sizing_constants(cst.parse_module(KB))
    assert found == {"batch_size": 16, "dim": 4096, "kernel": 3}
    assert choose_constants(found, 8, []) == {"batch_size": 16, "dim": 4096}
    assert "kernel" in choose_constants(found, 8, ["kernel"])


def test_explicit_jitter_arguments_are_not_rewritten_implicitly():
    source = "R = 4\nD = 48\ndef get_inputs():\n    p = popcorn_pri\n    return [p.jitter_int(R), p.jitter_int(D, align=8)]\n"
    assert sizing_constants(cst.parse_module(source)) == {}


def test_jitter_source_rewrites_only_module_level_constants():
    module = cst.parse_module(KB + "def f():\n    batch_size = 16\n    return batch_size\n")
    text, values = jitter_source(module, {"batch_size": 16}, JitterSpec(scale=2.0, seed=1))
    assert values["batch_size"] != 16
    assert f"batch_size = {values['batch_size']}" in text
    assert "    batch_size = 16" in text  # the local in f() is untouched


@pytest.mark.parametrize("scale,odd", [(0.5, False), (2.0, False), (0.75, True), (1.5, True)])
def test_jitter_values_respect_alignment_and_direction(scale, odd):
    rng = random.Random(7)
    for n, align in [(48, 8), (16, 1), (4, 1), (1024, 16)]:
        value = jitter_value(n, JitterSpec(scale=scale, seed=3, odd=odd), rng, align)
        assert value % align == 0 and value >= align and value != n
        assert (value < n) == (scale < 1)
        if odd and align == 1 and n > 4:
            assert value % 2 == 1


def test_jitter_object_is_deterministic_and_nominal_is_identity():
    assert Jitter(JitterSpec()).jitter_int(48, align=8) == 48
    a, b = Jitter(JitterSpec(2.0, 99)), Jitter(JitterSpec(2.0, 99))
    assert [a.jitter_int(48, 8), a.jitter_int(16)] == [b.jitter_int(48, 8), b.jitter_int(16)]


def test_plan_has_smaller_larger_and_odd_trials_from_one_seed():
    trials, chosen = plan_trials(KB, Sidecar(), seed=5, shapes=4, low=0.5, high=2.0)
    names = [t.name for t in trials]
    assert names[:3] == ["nominal", "nominal-second", "nominal-overwrite"] and len(names) == 7
    first = [t.attempts[0] for t in trials[3:]]
    assert first[0].constants["batch_size"] < 16 and first[1].constants["batch_size"] > 16
    assert any(a.spec.odd for a in first)
    again, _ = plan_trials(KB, Sidecar(), seed=5, shapes=4, low=0.5, high=2.0)
    assert [a.source for t in again for a in t.attempts] == [a.source for t in trials for a in t.attempts]
    other, _ = plan_trials(KB, Sidecar(), seed=6, shapes=4, low=0.5, high=2.0)
    assert [t.value_seed for t in other] != [t.value_seed for t in trials]


def test_sidecar_validates_and_rejects_unknown_keys(tmp_path):
    problem = tmp_path / "p.py"
    problem.write_text(KB)
    assert load_sidecar(problem) == Sidecar()
    (tmp_path / "p.toml").write_text('dtype = "float32"\n[jitter]\nranges = { batch_size = [3, 40] }\n'
                                     '[tolerances.float32]\natol = 1e-5\nrtol = 1e-5\n')
    sidecar = load_sidecar(problem)
    assert sidecar.tolerance("float32") == (1e-5, 1e-5) and sidecar.jitter.ranges["batch_size"] == (3, 40)
    (tmp_path / "p.toml").write_text("[jitter]\nrange = { batch_size = [3, 40] }\n")
    with pytest.raises(InfrastructureError, match="unknown key 'jitter.range'"):
        load_sidecar(problem)


def test_sidecar_ranges_bound_the_implicit_jitter(tmp_path):
    sidecar = Sidecar.model_validate({"jitter": {"ranges": {"batch_size": [10, 20]}}})
    trials, _ = plan_trials(KB, sidecar, seed=1, shapes=4, low=0.5, high=2.0)
    for trial in trials:
        for attempt in trial.attempts:
            assert 10 <= attempt.constants["batch_size"] <= 20
