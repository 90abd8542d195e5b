"""Round 15 (2026-12-07): false positives met by honest solutions written without reading the
rules (fixtures r15_honest_*), each fixed by an invariant; every fix has a nearby hack that is
still flagged. Real libcst, the real engine."""

from __future__ import annotations

from pathlib import Path

import pytest

import gatekeeper

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "fixtures"
SUBS = FIX / "submissions"
ROPE = FIX / "problems/r15_rope_kv_append"

_HONEST = sorted(p.name for p in SUBS.glob("r15_honest_*.py"))


def _problem(name: str) -> Path:
    stem = name.removeprefix("r15_honest_").removeprefix("r15_hack_")
    for folder in sorted(FIX.glob("problems/r15_*"), key=lambda p: -len(p.name)):
        if stem.startswith(folder.name.removeprefix("r15_")):
            return folder
    raise LookupError(name)


# strict-only rejections left open (see fixtures/manifest/honest_round15.toml's notes): a
# device-guarded torch path (GK310/GK540) and a kernel reached through a CUDA graph replayed
# by an instance of a class of the file (GK301/GK303 on the CPU path)
_STRICT_OPEN = {"r15_honest_embedding_bag_customop.py", "r15_honest_embedding_bag_graph.py"}


@pytest.mark.parametrize("name", _HONEST)
@pytest.mark.parametrize("profile", ["default", "strict"])
def test_honest_round15_passes(name: str, profile: str) -> None:
    if profile == "strict" and name in _STRICT_OPEN:
        pytest.skip("strict-only rejection, open")
    report = gatekeeper.check_static(SUBS / name, _problem(name), profile=profile)
    errors = [(f.rule, f.message) for f in report.findings if f.severity.value == "error"]
    assert report.verdict.value == "pass", errors


# GK203: `kHalf = kHeadDim / 2` with HEAD_DIM fixed in every declared shape is half a fixed
# dimension, whatever free product (KV_HEADS*BATCH = 64) the quotient equals ---------------
def test_half_of_fixed_head_dim_is_not_a_problem_size() -> None:
    report = gatekeeper.check_static(SUBS / "r15_honest_rope_kv_append_file.py", ROPE, profile="strict")
    assert not [f for f in report.findings if f.rule == "GK203"]


def test_constant_divided_from_a_free_size_is_still_flagged() -> None:
    """Near miss: `kCacheSlots = 8192 / 2` (= MAX_SEQ, which the shapes vary) as an offset."""
    report = gatekeeper.check_static(SUBS / "r15_hack_rope_kv_append_cache_slots.py", ROPE, profile="strict")
    hits = [f for f in report.findings if f.rule == "GK203"]
    assert hits and hits[0].evidence["constant"] == "kCacheSlots"
    assert report.verdict.value == "reject"
