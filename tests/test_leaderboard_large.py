"""The leaderboard page at scale: the submissions are split into pages, so every file
stays small however large the store; a pass with warnings is never ranked above a clean
pass without saying so; the empty scatter's note is not struck through by the 1x line.
The 10,000-row page is opened in headless Chromium too (required in CI). 100,000 rows:
bench/bench_leaderboard_pages.py (about a minute, so not in the suite)."""

import json
import re
from pathlib import Path

import pytest

from gatekeeper.ingest.html_page import PAGE_SIZE
from gatekeeper.ingest.normalise import sha256_bytes
from gatekeeper.ingest.store import RunKey, Store
from gatekeeper.ingest.svg_charts import scatter
from gatekeeper.pipeline import environment
from gatekeeper.report import (Category, FileRef, Finding, Location, ProblemRef, Report, Severity, StageName,
                               Verdict)
from test_leaderboard import gk
from test_leaderboard_html import console_messages, run_chromium

pytestmark = pytest.mark.slow  # renders ten thousand rows

KEY = RunKey("0.1.0", "default", "timing", "t" * 64)
PSHA = "a" * 64


def _report(verdict: Verdict, sha: str, findings: list, speedup=None) -> str:
    return Report(verdict=verdict, submission=FileRef(path="s", sha256=sha),
                  problem=ProblemRef(path="p.py", sha256=PSHA, name="p"), profile="default", findings=findings,
                  environment=environment(), score={"speedup": speedup, "sol_fraction": 0.5} if speedup else None,
                  ).model_dump_json()


def _warning() -> Finding:
    return Finding(rule="GK702", name="ExtremeSpeedupNeedsReview", category=Category.TIMING_IMPLAUSIBLE,
                   severity=Severity.WARNING, stage=StageName.TIMING, message="speedup above the review threshold",
                   hint="explain it")


def _reject() -> Finding:
    return Finding(rule="GK101", name="ReturnsPersistentTensor", category=Category.CACHED_OUTPUT,
                   severity=Severity.ERROR, stage=StageName.STATIC, message="cached", hint="allocate",
                   location=Location(path="s", line=1, column=1))


def make_store(path: Path, rows: int) -> Path:
    """`rows` results for problem p: every 4th a reject, one fast pass with a warning, one clean."""
    store = Store(path)
    reports = {v: _report(v, "0" * 64, [_reject()] if v == Verdict.REJECT else []) for v in Verdict}
    for i in range(rows):
        code = f"class ModelNew: pass\nV = {i}\n"
        sha = sha256_bytes(code.encode())
        verdict, findings, speedup, report = Verdict.PASS, 0, None, reports[Verdict.PASS]
        if i % 4 == 3:
            verdict, findings, report = Verdict.REJECT, 1, reports[Verdict.REJECT]
        elif i == 0:
            speedup, findings, report = 40.0, 1, _report(Verdict.PASS, sha, [_warning()], 40.0)
        elif i == 1:
            speedup, report = 2.0, _report(Verdict.PASS, sha, [], 2.0)
        store.add_submission("big", f"sub-{i:06d}", "p", PSHA, sha, sha, code)
        store.add_result({
            "code_key": sha, "submission_sha256": sha, "problem_sha256": PSHA, "problem": "p",
            "gatekeeper_version": KEY.gatekeeper_version, "profile": KEY.profile, "stages": KEY.stages,
            "config_sha256": KEY.config_sha256, "source_id": f"sub-{i:06d}", "verdict": verdict.value,
            "categories": json.dumps(["cached-output"] if verdict == Verdict.REJECT else []),
            "findings_count": findings, "speedup": speedup, "sol_fraction": 0.5 if speedup else None,
            "error": None, "duration_s": 0.1, "report_json": report})
    store.flush()
    store.close()
    return path


@pytest.fixture(scope="module")
def large(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("large")
    db = make_store(folder / "r.db", 10_000)
    run = gk("leaderboard", "--store", db, "--html", folder / "html")
    assert run.returncode == 0, run.stderr
    return folder / "html"


def test_ten_thousand_rows_are_split_into_light_pages(large):
    pages = sorted(large.glob("*.html"))
    assert len(pages) == 10_000 // PAGE_SIZE
    assert max(p.stat().st_size for p in pages) < 1_500_000
    index = (large / "index.html").read_text("utf-8")
    # The totals line is static HTML (readable without JS); its wording is html_sections.headline's.
    assert ('<p id="totals">10000 submission(s); 10000 result(s) on 1 board(s): 7500 passed, 2500 rejected, '
            '0 could not be checked.' in index)
    assert 'href="submissions-20.html"' in index
    last = (large / "submissions-20.html").read_text("utf-8")
    assert "Submissions 9501–10000 of 10000" in last and 'href="index.html"' in last
    assert len(re.findall(r'<details[^>]*class="submission"', last)) == PAGE_SIZE


def test_a_pass_with_warnings_does_not_outrank_a_clean_pass_silently(large):
    index = (large / "index.html").read_text("utf-8")
    board = re.search(r'<table id="leaderboard">.*?</table>', index, re.S).group(0)
    assert "sub-000001" in board and "2.00x" in board  # the clean pass leads, though slower
    from gatekeeper.ingest.leaderboard import Best, Board
    from gatekeeper.ingest.html_sections import leaderboard_table

    flagged = leaderboard_table([Board(problem="p", board="b", best=Best(source_id="w", speedup=40.0,
                                                                          result_id=1, warnings=1))])
    assert "passed with 1 warning(s)" in flagged


def test_empty_scatter_note_is_not_struck_through():
    svg = scatter([], empty_note="no timed results yet")
    assert "no timed results yet" in svg and 'class="parity"' not in svg
    assert 'class="parity"' in scatter([(0.5, 2.0, "x")], empty_note="none")


@pytest.mark.chromium
def test_ten_thousand_row_pages_render_in_chromium(large):
    for name in ("index.html", "submissions-20.html"):
        dump = run_chromium("--enable-logging=stderr", "--v=0", "--dump-dom", (large / name).as_uri())
        assert dump.returncode == 0, dump.stderr[-2000:]
        assert console_messages(dump.stderr) == [f"gatekeeper leaderboard ready: {PAGE_SIZE} submissions"]
        assert 'data-ready="yes"' in dump.stdout


def test_model_and_author_columns_when_the_source_has_them(tmp_path):
    from test_leaderboard import FOLDER, PROBLEMS  # noqa: F401

    honest = (Path(__file__).resolve().parent.parent / "fixtures/submissions/seed_honest_generic.py").read_text()
    source = tmp_path / "subs.jsonl"
    source.write_text("\n".join(json.dumps(r) for r in [
        {"id": "a", "problem": "seed_mean", "code": honest, "model": "kevin-32b", "author": "<b>lab</b>"},
        {"id": "b", "problem": "seed_mean", "code": honest + "\nX = 1\n"},
    ]) + "\n")
    run = gk("ingest", source, "--problems", PROBLEMS, "--store", tmp_path / "r.db", "--stages", "static")
    assert run.returncode == 0, run.stderr
    text = gk("leaderboard", "--store", tmp_path / "r.db")
    assert "model" in text.stdout and "kevin-32b" in text.stdout
    page = gk("leaderboard", "--store", tmp_path / "r.db", "--html", tmp_path / "html")
    assert page.returncode == 0, page.stderr
    html = (tmp_path / "html" / "index.html").read_text("utf-8")
    assert "<th>model</th><th>author</th>" in html and "kevin-32b" in html and "&lt;b&gt;lab&lt;/b&gt;" in html
    plain = tmp_path / "plain.jsonl"
    plain.write_text(json.dumps({"id": "c", "problem": "seed_mean", "code": honest}) + "\n")
    gk("ingest", plain, "--problems", PROBLEMS, "--store", tmp_path / "p.db", "--stages", "static")
    gk("leaderboard", "--store", tmp_path / "p.db", "--html", tmp_path / "plain")
    assert "<th>model</th>" not in (tmp_path / "plain" / "index.html").read_text("utf-8")
