"""How the hardcoded-shape rules name a problem size in their messages (problem_facts.dimension_labels,
product_text): by the name a reader knows it by, never as a bare number or an ambiguous product."""

from __future__ import annotations

from pathlib import Path

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def test_a_size_only_a_declared_shape_takes_is_named_by_its_key():
    # KernelBench-Hard folder: SEQ is 64 in the reference and 192 or 256 in declared shapes. A
    # literal 256 was explained as "the problem dimension 256 = 256" (round 7, 2026-12-06).
    from gatekeeper.analyses.shape_helpers import sizes_for
    from gatekeeper.problem.loaded import load_problem

    facts = load_problem(FIXTURES / "problems/kbhard_head_rmsnorm").facts
    assert facts.constants["SEQ"] == 64 and 256 in facts.free_dims["SEQ"]
    sizes = sizes_for(facts)
    assert sizes.meaning[256] == "the problem dimension SEQ = 256 in a declared shape"
    assert sizes.meaning[64] == "the problem dimension SEQ = 64"
    assert facts.explain(256) == "the problem dimension SEQ = 256 in a declared shape"


def test_a_product_with_a_size_of_two_names_brackets_them():
    # KernelBench conv: batch_size and in_channels are both 16; 48 read "kernel_size*batch_size
    # or in_channels = 48" (round 7, 2026-12-06)
    from gatekeeper.static.problem_facts import derive_sizes

    constants = {"kernel_size": 3, "batch_size": 16, "in_channels": 16}
    for relations in (False, True):
        text = derive_sizes([3, 16], constants, derived_relations=relations)[48]
        assert text == "kernel_size*(batch_size or in_channels) = 48"
