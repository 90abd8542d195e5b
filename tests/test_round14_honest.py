"""Round 14 (2026-12-07): false positives met by honest solutions written without reading the
rules (fixtures r14_honest_*), each fixed by an invariant; every fix has a nearby hack that is
still flagged. Real libcst, the real engine."""

from __future__ import annotations

from pathlib import Path
from textwrap import dedent

import pytest

import gatekeeper

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "fixtures"
GQA = FIX / "problems/r14_gqa_prefill"
MATMUL = FIX / "problems/cpu_matmul_small.py"


def _findings(source: str, problem: Path = MATMUL, profile: str = "default") -> list:
    return gatekeeper.check_static(dedent(source), problem, profile=profile).findings


def _rule(source: str, code: str, problem: Path = MATMUL, profile: str = "default") -> list:
    return [f for f in _findings(source, problem, profile) if f.rule == code]


# GK500: streams kept by a getter in a list, switched to by element, joined by a loop --------
_STREAMS = '''
import torch
class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self._streams = []
    def _side(self, n, device):
        while len(self._streams) < n:
            self._streams.append(torch.cuda.Stream(device=device))
        return self._streams[:n]
    def forward(self, x):
        out = torch.empty_like(x)
        main = torch.cuda.current_stream()
        streams = self._side(4, x.device)
        for s in streams:
            s.wait_stream(main)
        for b in range(x.shape[0]):
            s = streams[b % len(streams)]
            with torch.cuda.stream(s):
                _ext.run(x[b], out[b])
{JOIN}
        return out
'''
_LOOP_JOIN = '''        for s in streams:
            main.wait_stream(s)'''


@pytest.mark.parametrize("profile", ["default", "strict"])
def test_streams_appended_by_a_getter_and_joined_by_a_loop_over_them_are_joined(profile):
    found = _rule(_STREAMS.replace("{JOIN}", _LOOP_JOIN), "GK500", profile=profile)
    assert found and all(f.severity.value == "warning" for f in found)
    assert all(f.evidence.get("joined") is True for f in found)


def test_the_getter_streams_never_joined_still_reject():
    found = _rule(_STREAMS.replace("{JOIN}", "        pass"), "GK500")
    assert any(f.severity.value == "error" and f.confidence.value == "certain" for f in found)


@pytest.mark.parametrize("join", [
    # another collection: not proven to hold the stream that did the work
    '''        others = list(streams[1:])
        for s in others:
            main.wait_stream(s)''',
    # the collection loses elements between the work and the join
    '''        streams.pop(0)
        for s in streams:
            main.wait_stream(s)''',
    # the name is rebound between the work and the join
    '''        streams = streams[1:]
        for s in streams:
            main.wait_stream(s)''',
])
def test_a_loop_join_that_may_miss_the_stream_stays_unproven(join):
    found = _rule(_STREAMS.replace("{JOIN}", join), "GK500", profile="strict")
    assert any(f.severity.value == "error" and f.evidence.get("joined") != True for f in found)


def test_the_round14_streams_fixture_is_clean_in_both_profiles():
    source = (FIX / "submissions/r14_honest_gqa_prefill_streams.py").read_text()
    for profile in ("default", "strict"):
        assert not [f for f in gatekeeper.check_static(source, GQA, profile=profile).findings
                    if f.severity.value == "error"]
