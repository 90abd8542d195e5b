"""The page's sections as HTML fragments. Everything from the store is escaped: ids,
messages, hints and code are written by the adversary."""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from typing import Iterable, Optional

from gatekeeper.ingest.leaderboard import Board, format_sol, format_speedup, has_meta
from gatekeeper.ingest.queries import Entry, checked_sha, code_for, report_json
from gatekeeper.ingest.svg_charts import esc

CONTEXT_LINES = 2


def _best_cell(best) -> str:
    """The best pass, saying when it carries warnings (precision, timing review, ...): it is
    ranked by speed alone, and a reader must not take it for a clean pass."""
    if not best.warnings:
        return esc(best.source_id)
    return (f'{esc(best.source_id)} <span class="warn">(passed with {best.warnings} warning(s); '
            'not ranked above clean passes on speed alone: read its findings)</span>')


def leaderboard_table(boards: list[Board]) -> str:
    rows = []
    with_meta = has_meta(boards)  # model and author columns only when the source has them
    for b in boards:
        best = b.best
        cats = ", ".join(f"{esc(c)} {n}" for c, n in b.rejects_by_category.items()) or "-"
        meta = (f"<td>{esc(best.model or '-') if best else '-'}</td><td>{esc(best.author or '-') if best else '-'}</td>"
                if with_meta else "")
        rows.append(
            f"<tr><td>{esc(b.problem)}</td><td>{esc(b.board)}</td><td class=num>{b.submissions}</td>"
            f"<td class=num>{b.passed}</td><td class=num>{b.rejected}</td><td class=num>{b.errors}</td>"
            f"<td>{_best_cell(best) if best else '<em>none passed</em>'}</td>{meta}"
            f"<td class=num>{esc(format_speedup(best.speedup)) if best else '-'}</td>"
            f"<td class=num>{esc(format_sol(best.sol_fraction)) if best else '-'}</td><td>{cats}</td></tr>")
    if not rows:
        rows.append('<tr><td colspan=12><em>no results in this store</em></td></tr>')
    return ('<table id="leaderboard"><thead><tr><th>problem</th><th>board (stages · profile · version)</th>'
            '<th>subs</th><th>pass</th><th>reject</th><th>error</th><th>best passing</th>'
            + ('<th>model</th><th>author</th>' if with_meta else '') +
            '<th>speedup</th><th>SOL</th><th>rejects by category</th></tr></thead><tbody>' + "".join(rows)
            + "</tbody></table>")


def reject_counts(items: Iterable[Entry]) -> list[tuple[str, int]]:
    """Per category, the submissions rejected for it: each submission once, however many boards
    (profiles, stages, versions) it was checked on; counting results instead doubled the
    table's per-board figures in a store with two boards."""
    seen = {(entry.source_id, c) for entry in items if entry.verdict == "reject" for c in entry.categories}
    counter: Counter = Counter(c for _, c in seen)
    return sorted(counter.items(), key=lambda kv: (-kv[1], kv[0]))


def headline(items: list[Entry], boards: int) -> str:
    """The totals line: distinct submissions, then the results (one per submission and board)."""
    submissions = len({entry.source_id for entry in items})
    counts = Counter(entry.verdict for entry in items)
    return (f"{submissions} submission(s); {len(items)} result(s) on {boards} board(s): {counts['pass']} passed, "
            f"{counts['reject']} rejected, {counts['error']} could not be checked.")


def scatter_points(items: Iterable[Entry]) -> list[tuple[float, float, str]]:
    return [(e.sol_fraction, e.speedup, f"{e.problem} / {e.source_id}") for e in items
            if e.verdict == "pass" and e.speedup is not None and e.sol_fraction is not None]


def _excerpt(code: Optional[str], lines: set[int]) -> str:
    if not code or not lines:
        return ""
    source = code.splitlines()
    shown: set[int] = set()
    for line in lines:
        shown.update(range(max(1, line - CONTEXT_LINES), min(len(source), line + CONTEXT_LINES) + 1))
    out, previous = [], 0
    for number in sorted(shown):
        if previous and number != previous + 1:
            out.append('<span class="gap">⋯</span>')
        mark = ' class="hit"' if number in lines else ""
        out.append(f'<span{mark}><b>{number:>4}</b> {esc(source[number - 1])}</span>')
        previous = number
    return '<pre class="code">' + "".join(out) + "</pre>"  # each line is a block span


def _findings_table(findings: list[dict]) -> str:
    rows = []
    for f in findings:
        where = (f.get("location") or {}).get("line")
        rows.append(f"<tr class=\"sev-{esc(f.get('severity', ''))}\"><td>{esc(f.get('rule', ''))}</td>"
                    f"<td>{esc(f.get('severity', ''))}</td><td>{esc(f.get('category', ''))}</td>"
                    f"<td>{esc(where if where else '-')}</td><td>{esc(f.get('message', ''))}"
                    f"<div class=hint>{esc(f.get('hint', ''))}</div></td></tr>")
    return ('<table class="findings"><thead><tr><th>rule</th><th>severity</th><th>category</th><th>line</th>'
            '<th>message and hint</th></tr></thead><tbody>' + "".join(rows) + "</tbody></table>")


def submission_details(conn: sqlite3.Connection, items: list[Entry], open_bad: bool = True) -> str:
    """Every entry of `items` (one page of them) with its findings and code excerpt.
    `open_bad`: rejects and errors start open (a small board: read without a click)."""
    reports: dict[int, dict] = {}
    parts = []
    for entry in items:
        if entry.result_id not in reports:
            try:
                reports[entry.result_id] = json.loads(report_json(conn, entry.result_id))
            except ValueError:
                reports[entry.result_id] = {}
        report = reports[entry.result_id]
        findings = report.get("findings") or []
        sha = checked_sha(conn, entry.result_id) or entry.submission_sha256
        code = code_for(conn, sha)
        lines = {((f.get("location") or {}).get("line")) for f in findings} - {None}
        note = ""
        if sha != entry.submission_sha256:
            note = ('<p class="note">Same code as another submission after normalising comments, layout and '
                    'docstrings; checked once. Lines refer to the copy that was checked.</p>')
        error = f'<p class="error">{esc(report.get("error"))}</p>' if report.get("error") else ""
        cats = ", ".join(entry.categories) or "-"
        body = (_findings_table(findings) if findings else "<p>No findings.</p>") + _excerpt(code, lines)
        opened = " open" if open_bad and entry.verdict != "pass" else ""
        parts.append(
            f'<details{opened} class="submission" data-verdict="{esc(entry.verdict)}" '
            f'data-search="{esc((entry.problem + " " + entry.source_id + " " + cats).lower())}">'
            f'<summary><span class="verdict v-{esc(entry.verdict)}">{esc(entry.verdict)}</span> '
            f'<code>{esc(entry.source_id)}</code> · {esc(entry.problem)} · {esc(entry.board)} · '
            f'{len(findings)} finding(s) · {esc(cats)}</summary>{note}{error}{body}</details>')
    return "".join(parts)
