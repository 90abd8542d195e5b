"""The behaviour stage end to end on small CPU problems written here: problem errors, jitter
that the reference rejects, seeds that reproduce a run. Real workers, real torch."""

from pathlib import Path

import pytest

import gatekeeper

pytestmark = pytest.mark.slow  # runs submissions in the sandbox

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
HONEST = FIXTURES / "submissions" / "cpu_honest_python.py"  # torch does the work: static rejects it
HONEST_CPP = FIXTURES / "submissions" / "cpu_honest_cpp.py"  # passes every stage

FIXED_SHAPE = '''
import torch
import torch.nn as nn
rows = 16
cols = 48
class Model(nn.Module):
    def forward(self, x):
        assert tuple(x.shape) == (4, 16, 48), "this reference only accepts 4 x 16 x 48"
        return x.mean(dim=0)
def get_inputs():
    return [torch.randn(4, rows, cols)]
def get_init_inputs():
    return []
'''


def _check(problem, **kwargs):
    # HONEST is pure torch on purpose (these tests probe the problem side): who did the work
    # (GK667) is tested in test_attribution.py and the runtime_* fixtures.
    from gatekeeper.config import Config, RuleSettings

    kwargs.setdefault("config", Config(rules={"GK667": RuleSettings(enabled=False)}))
    return gatekeeper.check(HONEST, problem, stages="behaviour", keep_going=True, **kwargs)


def _behaviour(report):
    return next(s for s in report.stages if s.name.value == "behaviour")


def test_problem_that_fails_to_load_is_an_error_not_a_reject(tmp_path):
    problem = tmp_path / "broken.py"
    problem.write_text("import torch\nraise ImportError('missing dependency of the problem')\n")
    report = gatekeeper.check(HONEST_CPP, problem, stages="behaviour")
    assert report.verdict.value == "error" and report.exit_code == 3
    assert "problem error" in _behaviour(report).reason and "missing dependency" in _behaviour(report).reason


def test_reference_failing_on_nominal_inputs_is_an_error(tmp_path):
    problem = tmp_path / "bad_ref.py"
    problem.write_text(FIXED_SHAPE.replace("(4, 16, 48)", "(1, 2, 3)"))
    report = gatekeeper.check(HONEST_CPP, problem, stages="behaviour")
    assert report.verdict.value == "error" and report.exit_code == 3
    assert "nominal" in _behaviour(report).reason


def test_jitter_the_reference_rejects_is_reported_not_skipped(tmp_path):
    problem = tmp_path / "fixed.py"
    problem.write_text(FIXED_SHAPE)
    report = _check(problem)
    notes = [f for f in report.findings if f.rule == "GK670"]
    assert len(notes) == 1 and notes[0].severity.value == "warning"
    assert "rejected every jittered shape" in notes[0].message
    assert _behaviour(report).status.value == "passed"
    assert report.environment.isolation in ("bwrap", "unshare", "none")


def test_seed_reproduces_the_shapes_and_is_recorded(tmp_path):
    hacked = FIXTURES / "submissions" / "cpu_hardcoded_cpp.py"
    problem = FIXTURES / "problems" / "cpu_seed_mean.py"
    first = gatekeeper.check(hacked, problem, stages="behaviour", keep_going=True, seed=1234)
    again = gatekeeper.check(hacked, problem, stages="behaviour", keep_going=True, seed=1234)
    assert first.seed == again.seed == 1234
    shapes = [f.evidence.get("trial_shapes") for f in first.findings if f.rule == "GK602"]
    assert shapes and shapes == [f.evidence.get("trial_shapes") for f in again.findings if f.rule == "GK602"]
    jittered = [s for name, s in shapes[0].items() if name.startswith("jitter")]
    nominal = shapes[0]["nominal"]
    assert len(jittered) >= 3 and all(s != nominal for s in jittered)
    sizes = [s[0][1] * s[0][2] for s in jittered]
    assert min(sizes) < 16 * 48 < max(sizes)


def test_unseeded_runs_draw_a_fresh_seed():
    problem = FIXTURES / "problems" / "cpu_mean.py"
    seeds = {_check(problem).seed for _ in range(2)}
    assert None not in seeds and len(seeds) == 2


INPLACE_PROBLEM = '''
import torch
import torch.nn as nn
rows = 16
cols = 48
class Model(nn.Module):
    def forward(self, x):
        return x.relu_()
def get_inputs():
    return [torch.randn(rows, cols)]
def get_init_inputs():
    return []
'''

SAME_INPLACE = '''
import torch
import torch.nn as nn
class ModelNew(nn.Module):
    def forward(self, x):
        return x.clamp_(min=0)
'''

COPYING = SAME_INPLACE.replace("x.clamp_(min=0)", "x.clamp(min=0)")


def _runtime_rules(report):
    # The probes are pure torch: GK667 (torch did the work) is expected and tested elsewhere.
    # Warnings (GK612: an output buffer reused with fresh values) are not what is asked here.
    return sorted({f.rule for f in report.findings if f.stage.value == "behaviour" and f.rule != "GK667"
                   and f.severity.value == "error"})


def test_mutation_and_alias_are_allowed_when_the_reference_does_the_same(tmp_path):
    problem = tmp_path / "inplace.py"
    problem.write_text(INPLACE_PROBLEM)
    same = gatekeeper.check(SAME_INPLACE, problem, stages="behaviour", keep_going=True)
    assert _runtime_rules(same) == [], [f.message for f in same.findings]
    # The honest near miss the other way round: copying is fine too (the reference's
    # mutation is not required of the submission).
    copying = gatekeeper.check(COPYING, problem, stages="behaviour", keep_going=True)
    assert _runtime_rules(copying) == [], [f.message for f in copying.findings]


def test_constant_reference_output_is_noted(tmp_path):
    problem = tmp_path / "zeros.py"
    problem.write_text(INPLACE_PROBLEM.replace("return x.relu_()", "return x * 0"))
    report = gatekeeper.check(COPYING.replace("x.clamp(min=0)", "x * 0"), problem, stages="behaviour",
                              keep_going=True)
    notes = [f for f in report.findings if f.rule == "GK603"]
    assert len(notes) == 1 and notes[0].severity.value == "info" and "all zeros" in notes[0].message
