"""`gatekeeper leaderboard --html DIR`: self-contained pages, index.html first.

The submissions are split into pages of PAGE_SIZE (submissions-2.html, ...), so that a
store of 100,000 submissions gives 200 light pages instead of one file of 170 MB.

Inline CSS, inline SVG, one small inline script; no external resource, no network. A
Content-Security-Policy allows only that script (by its hash), so even markup that slipped
past escaping could not run code or load anything."""

from __future__ import annotations

import base64
import hashlib
import sqlite3
import time
from pathlib import Path

from gatekeeper.errors import UsageError
from gatekeeper.ingest.html_sections import (headline, leaderboard_table, reject_counts, scatter_points,
                                             submission_details)
from gatekeeper.ingest.leaderboard import Board
from gatekeeper.ingest.queries import Entry
from gatekeeper.ingest.svg_charts import bars, esc, scatter
from gatekeeper.version import __version__

CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:1200px;padding:0 16px;color:#1d2330}
h1{font-size:22px}h2{font-size:17px;margin-top:32px;border-bottom:1px solid #dde;padding-bottom:4px}
table{border-collapse:collapse;width:100%;margin:8px 0}th,td{border-bottom:1px solid #e4e6ee;padding:4px 6px;
text-align:left;vertical-align:top}th{background:#f3f4f8}td.num{text-align:right;font-variant-numeric:tabular-nums}
.chart{max-width:640px;width:100%;border:1px solid #e4e6ee;background:#fff}.grid{stroke:#eceef4}
.parity{stroke:#c33;stroke-dasharray:4 3}.tick,.value,.label{font-size:11px;fill:#555}.axis{font-size:12px;fill:#333}
.note{fill:#777;color:#777}.point{fill:#2a6fdb;fill-opacity:.75}.bar{fill:#d9822b}
details.submission{border:1px solid #e4e6ee;border-radius:4px;margin:6px 0;padding:4px 8px}
summary{cursor:pointer}.verdict{font-weight:600;padding:0 6px;border-radius:3px;color:#fff}
.v-pass{background:#2e8540}.v-reject{background:#c0392b}.v-error{background:#7f8c8d}
pre.code{background:#f7f7fa;padding:8px;overflow-x:auto;font-size:12px}pre.code span{display:block}
pre.code .hit{background:#ffe9a8}pre.code b{color:#999;font-weight:400}.hint{color:#2e6b3a;margin-top:2px}
.error{color:#8a1f11}.controls{margin:8px 0}.controls input{width:280px}.hidden{display:none}
nav.pages{margin:8px 0;line-height:1.9}nav.pages a,nav.pages b{padding:0 3px}.warn{color:#9a6700}
"""

# Static: its hash goes in the CSP, so it must not be built from data.
SCRIPT = """
(function () {
  var search = document.getElementById('filter');
  var verdict = document.getElementById('verdict');
  var items = Array.prototype.slice.call(document.querySelectorAll('details.submission'));
  var counter = document.getElementById('shown');
  function apply() {
    var q = search.value.toLowerCase(), v = verdict.value, shown = 0;
    items.forEach(function (el) {
      var ok = (!v || el.getAttribute('data-verdict') === v) &&
               (!q || el.getAttribute('data-search').indexOf(q) !== -1);
      el.classList.toggle('hidden', !ok);
      if (ok) { shown += 1; }
    });
    counter.textContent = String(shown);
  }
  search.addEventListener('input', apply);
  verdict.addEventListener('change', apply);
  apply();
  document.documentElement.setAttribute('data-ready', 'yes');
  console.log('gatekeeper leaderboard ready: ' + items.length + ' submissions');
})();
"""


def _csp() -> str:
    digest = base64.b64encode(hashlib.sha256(SCRIPT.encode("utf-8")).digest()).decode()
    return (f"default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
            f"script-src 'sha256-{digest}'; base-uri 'none'; form-action 'none'")


PAGE_SIZE = 500  # submissions per page: a page stays a few hundred kB however large the store


def page_name(number: int) -> str:
    return "index.html" if number == 1 else f"submissions-{number}.html"


def _nav(number: int, pages: int) -> str:
    """Links to every page of submissions (the current one in bold)."""
    if pages <= 1:
        return ""
    links = []
    for n in range(1, pages + 1):
        links.append(f"<b>{n}</b>" if n == number else f'<a href="{page_name(n)}">{n}</a>')
    prev = f'<a rel="prev" href="{page_name(number - 1)}">previous</a> ' if number > 1 else ""
    nxt = f' <a rel="next" href="{page_name(number + 1)}">next</a>' if number < pages else ""
    return f'<nav class="pages">page {number} of {pages}: {prev}{" ".join(links)}{nxt}</nav>'


def _head(title: str) -> str:
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{esc(_csp())}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{esc(title)}</title><style>{CSS}</style></head>
<body>
"""


def _submissions_section(conn: sqlite3.Connection, items: list[Entry], number: int, pages: int) -> str:
    chunk = items[(number - 1) * PAGE_SIZE: number * PAGE_SIZE]
    first = (number - 1) * PAGE_SIZE + 1
    where = (f"<p>Submissions {first}–{first + len(chunk) - 1} of {len(items)}; the filter applies to "
             "this page (for a store-wide view use <code>--problem</code> or <code>gatekeeper export</code>).</p>"
             if pages > 1 else "")
    return f"""{_nav(number, pages)}{where}
<div class="controls"><input id="filter" type="search" placeholder="filter by id, problem or category">
<select id="verdict"><option value="">every verdict</option><option>pass</option><option>reject</option>
<option>error</option></select> <span id="shown">{len(chunk)}</span> shown</div>
<div id="submissions">{submission_details(conn, chunk, open_bad=len(items) <= 200)}</div>
{_nav(number, pages)}
<script>{SCRIPT}</script>
</body></html>
"""


def render_page(conn: sqlite3.Connection, boards: list[Board], items: list[Entry], pages: int = 1) -> str:
    """The first page: totals, the leaderboard, the charts and the first submissions."""
    generated = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    return _head("gatekeeper leaderboard") + f"""<h1>gatekeeper leaderboard</h1>
<p id="totals">{esc(headline(items, len(boards)))} Generated {esc(generated)} by gatekeeper {esc(__version__)}.</p>
<h2>Best passing submission per problem</h2>
{leaderboard_table(boards)}
<h2>Speedup against fraction of speed of light</h2>
{scatter(scatter_points(items), empty_note="no timed results yet: ingest with --stages timing on a GPU")}
<h2>Rejected submissions by category</h2>
<p class="note">Each submission counts once per category, whatever the boards it was checked on.</p>
{bars(reject_counts(items), empty_note="no rejects")}
<h2>Submissions and their findings</h2>
""" + _submissions_section(conn, items, 1, pages)


def render_submissions_page(conn: sqlite3.Connection, items: list[Entry], number: int, pages: int) -> str:
    return _head(f"gatekeeper leaderboard: submissions, page {number}") + (
        f'<h1><a href="index.html">gatekeeper leaderboard</a>: submissions</h1>\n'
        + _submissions_section(conn, items, number, pages))


def write_page(conn: sqlite3.Connection, boards: list[Board], items: list[Entry], folder: Path) -> Path:
    """index.html, plus submissions-N.html for every further PAGE_SIZE submissions."""
    pages = max(1, -(-len(items) // PAGE_SIZE))
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for stale in folder.glob("submissions-*.html"):  # pages of an earlier, larger store
            stale.unlink()
        page = folder / "index.html"
        page.write_text(render_page(conn, boards, items, pages), encoding="utf-8")
        for number in range(2, pages + 1):
            (folder / page_name(number)).write_text(render_submissions_page(conn, items, number, pages),
                                                    encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot write the page into {folder}: {exc.strerror}") from None
    return page
