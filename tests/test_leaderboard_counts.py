"""The leaderboard page's totals and category chart count submissions, not results: a
submission checked on two boards (two profiles, or static and behaviour runs) is one
submission, and rejected for a category once (issue 21, item 10)."""

from __future__ import annotations

from gatekeeper.ingest.html_sections import headline, reject_counts
from gatekeeper.ingest.leaderboard import build_boards
from gatekeeper.ingest.queries import Entry


def _entry(source: str, result: int, verdict: str, categories: list[str], profile: str) -> Entry:
    return Entry(source, "seed_mean", "sha-" + source, result, verdict, categories, len(categories), None, None,
                 profile, "static", "0.1.0", None)


ITEMS = [
    _entry("hacked.py", 1, "reject", ["cached-output", "hardcoded-shape"], "default"),
    _entry("hacked.py", 2, "reject", ["cached-output", "hardcoded-shape"], "strict"),
    _entry("honest.py", 3, "pass", [], "default"),
    _entry("honest.py", 4, "reject", ["torch-fallback"], "strict"),
]


def test_the_headline_counts_each_submission_once():
    boards = build_boards(ITEMS)
    assert len(boards) == 2
    assert headline(ITEMS, len(boards)) == ("2 submission(s); 4 result(s) on 2 board(s): 1 passed, 3 rejected, "
                                            "0 could not be checked.")


def test_the_category_chart_counts_submissions_and_agrees_with_each_board():
    counts = dict(reject_counts(ITEMS))
    assert counts == {"cached-output": 1, "hardcoded-shape": 1, "torch-fallback": 1}
    for board in build_boards(ITEMS):  # no board's row can exceed the chart's count
        for category, n in board.rejects_by_category.items():
            assert n <= counts[category]
