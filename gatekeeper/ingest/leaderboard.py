"""Per problem (and per board: last stage, profile, version), the best passing submission
and the rejects by category."""

from __future__ import annotations

from collections import Counter
from typing import Iterable, Optional

from pydantic import BaseModel, Field

from gatekeeper.ingest.queries import Entry


class Best(BaseModel):
    source_id: str
    speedup: Optional[float] = None
    sol_fraction: Optional[float] = None
    result_id: int
    warnings: int = 0  # a pass carries only warnings and notes; said next to it wherever it is shown
    model: Optional[str] = None
    author: Optional[str] = None

    @property
    def timed(self) -> bool:
        return self.speedup is not None


class Board(BaseModel):
    problem: str
    board: str
    submissions: int = 0
    passed: int = 0
    rejected: int = 0
    errors: int = 0
    best: Optional[Best] = None
    rejects_by_category: dict[str, int] = Field(default_factory=dict)


def _better(entry: Entry, best: Optional[Best]) -> bool:
    if best is None:
        return True
    # A timed pass beats an untimed one; then a clean pass beats one with warnings (a
    # precision downgrade or a speedup under review must not outrank an honest pass on
    # speed); then the larger speedup; ties keep the first id.
    if entry.speedup is None:
        return False
    if best.speedup is None:
        return True
    clean, best_clean = entry.findings_count == 0, best.warnings == 0
    if clean != best_clean:
        return clean
    return entry.speedup > best.speedup


Meta = dict[str, tuple[Optional[str], Optional[str]]]


def load_meta(conn) -> Meta:
    """source id -> (model, author), for sources that carry them; {} for older stores."""
    import sqlite3

    try:
        rows = conn.execute("SELECT source_id, model, author FROM submission_meta").fetchall()
    except sqlite3.OperationalError:  # a store written before the table existed
        return {}
    return {source_id: (model, author) for source_id, model, author in rows}


def has_meta(boards: list[Board]) -> bool:
    return any(b.best is not None and (b.best.model or b.best.author) for b in boards)


def build_boards(items: Iterable[Entry], meta: Optional[Meta] = None) -> list[Board]:
    boards: dict[tuple[str, str], Board] = {}
    categories: dict[tuple[str, str], Counter] = {}
    for entry in items:
        key = (entry.problem, entry.board)
        board = boards.setdefault(key, Board(problem=entry.problem, board=entry.board))
        board.submissions += 1
        if entry.verdict == "pass":
            board.passed += 1
            if _better(entry, board.best):
                board.best = Best(source_id=entry.source_id, speedup=entry.speedup,
                                  sol_fraction=entry.sol_fraction, result_id=entry.result_id,
                                  warnings=entry.findings_count,
                                  model=(meta or {}).get(entry.source_id, (None, None))[0],
                                  author=(meta or {}).get(entry.source_id, (None, None))[1])
        elif entry.verdict == "reject":
            board.rejected += 1
            categories.setdefault(key, Counter()).update(entry.categories)
        else:
            board.errors += 1
    for key, counter in categories.items():
        boards[key].rejects_by_category = dict(sorted(counter.items(), key=lambda kv: (-kv[1], kv[0])))
    return [boards[k] for k in sorted(boards)]


def format_speedup(value: Optional[float]) -> str:
    return "not timed" if value is None else f"{value:.2f}x"


def format_sol(value: Optional[float]) -> str:
    return "not timed" if value is None else f"{value * 100:.1f}%"


def print_boards(boards: list[Board], console) -> None:
    from rich.table import Table

    columns = ["problem", "board", "subs", "pass", "reject", "error", "best passing", "speedup", "SOL",
               "rejects by category"]
    with_meta = has_meta(boards)
    table = Table(*columns[:7], *(["model", "author"] if with_meta else []), *columns[7:], box=None)
    for b in boards:
        best = b.best
        cats = ", ".join(f"{c} {n}" for c, n in b.rejects_by_category.items()) or "-"
        meta_cells = [(best.model or "-") if best else "-", (best.author or "-") if best else "-"] if with_meta else []
        table.add_row(b.problem, b.board, str(b.submissions), str(b.passed), str(b.rejected), str(b.errors),
                      (best.source_id + (f" ({best.warnings} warning(s))" if best.warnings else "")) if best
                      else "(none passed)", *meta_cells,
                      format_speedup(best.speedup) if best else "-", format_sol(best.sol_fraction) if best else "-",
                      cats)
    console.print(table)
