"""GK203 follows a size into a local index: a problem size inside the initialiser of a local
(`dst = ((b * 4096 + slot) * heads + h) * 128`) that then addresses a pointer parameter
(`k_cache + dst + c`, `out[dst]`) is an offset, as if written in the index. A local that only
sizes a launch's shared memory or is handed to a call is no index. Real libcst, real files."""

from __future__ import annotations

from pathlib import Path

import gatekeeper

ROOT = Path(__file__).resolve().parent.parent
HACK = ROOT / "fixtures/submissions/r15_hack_rope_kv_append_slots_local.py"
ROPE = ROOT / "fixtures/problems/r15_rope_kv_append"
LOCAL = "const int64_t dst = ((b * kCacheSlots + slot) * heads + h) * kHeadDim;"


def _check(tmp_path: Path, text: str, profile: str = "strict"):
    path = tmp_path / "solution.py"
    path.write_text(text)
    return gatekeeper.check_static(path, ROPE, profile=profile)


def _gk203(report) -> list:
    return [f for f in report.findings if f.rule == "GK203"]


def test_capacity_in_a_local_index_is_flagged() -> None:
    for profile, verdict in (("default", "pass"), ("strict", "reject")):
        report = gatekeeper.check_static(HACK, ROPE, profile=profile)
        hits = _gk203(report)
        assert hits and hits[0].evidence["constant"] == "kCacheSlots", report.findings
        assert report.verdict.value == verdict  # a suspect: the run-time jitter (GK602) settles it


def test_through_a_second_local(tmp_path: Path) -> None:
    text = HACK.read_text()
    assert LOCAL in text
    text = text.replace(LOCAL, "const int64_t row = b * kCacheSlots + slot;\n"
                               "    const int64_t dst = (row * heads + h) * kHeadDim;")
    assert [f.evidence["constant"] for f in _gk203(_check(tmp_path, text))] == ["kCacheSlots"]


def test_index_from_the_given_capacity_is_clean(tmp_path: Path) -> None:
    """The twin: the same local built from the `max_seq` the kernel is handed."""
    text = HACK.read_text().replace(LOCAL, LOCAL.replace("kCacheSlots", "max_seq"))
    report = _check(tmp_path, text)
    assert not _gk203(report) and report.verdict.value == "pass", report.findings


def test_a_local_that_sizes_shared_memory_is_no_index(tmp_path: Path) -> None:
    """`smem = 2 * kStage * sizeof(float)` handed to `<<<grid, block, smem>>>`: the launch's
    arguments follow it, but a shared-memory size addresses nothing."""
    text = HACK.read_text().replace(LOCAL, LOCAL.replace("kCacheSlots", "max_seq"))
    text = text.replace("constexpr int kCacheSlots = 4096;", "constexpr int kStage = 4096;")
    launch = "<<<grid, 32 * kWarpsPerBlock, 0, at::cuda::getCurrentCUDAStream()>>>"
    assert launch in text
    text = text.replace(launch, "<<<grid, 32 * kWarpsPerBlock, smem, at::cuda::getCurrentCUDAStream()>>>")
    text = text.replace("    if (total == 0) return;", "    if (total == 0) return;\n"
                        "    const int smem = 2 * kStage * (int)sizeof(float);")
    report = _check(tmp_path, text)
    assert not _gk203(report) and report.verdict.value == "pass", report.findings


def test_a_number_handed_to_a_call_is_not_the_locals(tmp_path: Path) -> None:
    """`int64_t dst = std::min<int64_t>(b * kCacheSlots, ...)`: the callee's argument, not an
    index the local is built from (only grouping parentheses carry a number into a local)."""
    text = HACK.read_text().replace(
        LOCAL, "const int64_t dst = ((b * max_seq + slot) * heads + h) * kHeadDim;\n"
               "    const int64_t cap = std::min<int64_t>(b * kCacheSlots, total);\n"
               "    if (cap < 0) return;")
    assert not _gk203(_check(tmp_path, text))
