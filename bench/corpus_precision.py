"""Static-stage rejection rates on the real submissions in ../shared/corpus.

The corpus labels come from each source's own harness (see its README), so this measures
how often gatekeeper rejects code that the benchmark judged correct, not a ground truth.
Rows: technoabsurdist split into KernelBench-correct submissions that build a kernel of
their own and the rest, hzeng2000 by backend, CUDA-L1 final split into pure-torch files
and files with a kernel. Columns: files, rejected, rate, and the rules behind the rejects.

    python bench/corpus_precision.py [--corpus ../shared/corpus] [--jobs 2]
        [--profile default] [--dump rejects.jsonl] [--write]

`--write` replaces the table between the corpus markers in docs/figures.md.
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import sys
from collections import Counter, defaultdict
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

OWN_KERNEL = re.compile(r"load_inline\s*\(|cpp_extension\.load\s*\(|\bload\s*\(\s*name\s*=|@triton\.jit|triton\.jit\b")
MARK_START, MARK_END = "<!-- corpus:start -->", "<!-- corpus:end -->"


def builds_own_kernel(text: str) -> bool:
    return bool(OWN_KERNEL.search(text))


def rows(corpus: Path) -> list[dict]:
    out = []
    for source in ("technoabsurdist", "hzeng2000", "cuda_l1"):
        labels = corpus / source / "labels.csv"
        if not labels.is_file():
            continue
        with labels.open() as fh:
            for rec in csv.DictReader(fh):
                path = corpus / rec["path"]
                if not path.is_file():
                    continue
                text = path.read_text("utf-8", errors="replace")
                if source == "cuda_l1" and rec.get("empty") == "True":
                    continue
                own = builds_own_kernel(text)
                if source == "technoabsurdist":
                    correct = rec.get("correct") == "True"
                    group = "technoabsurdist correct, own kernel" if correct and own else "technoabsurdist other"
                elif source == "hzeng2000":
                    group = f"hzeng2000 {rec['backend']}"
                else:
                    group = "cuda_l1 own kernel" if own else "cuda_l1 pure torch"
                out.append({"group": group, "level": rec["level"], "path": str(path), "ref": str(corpus / rec["ref"])})
    return out


def check_one(args: tuple[str, str, str]) -> dict:
    path, ref, profile = args
    from gatekeeper.api import check_static
    from gatekeeper.errors import GatekeeperError

    try:
        report = check_static(Path(path), Path(ref), profile=profile)
    except GatekeeperError as exc:
        return {"path": path, "verdict": "error", "errors": [], "why": str(exc)[:200]}
    errors = [
        {"rule": f.rule, "line": f.location.line if f.location else None, "message": f.message[:300]}
        for f in report.findings
        if f.severity.value == "error"
    ]
    warnings = sorted({f.rule for f in report.findings if f.severity.value == "warning"})
    return {"path": path, "verdict": report.verdict.value, "errors": errors, "warnings": warnings}


def table(results: list[dict], meta: dict[str, dict]) -> str:
    by_group: dict[str, list[dict]] = defaultdict(list)
    for r in results:
        by_group[meta[r["path"]]["group"]].append(r)
    lines = ["| submissions | files | rejected | rate | rules behind the rejects (files) |", "|---|---|---|---|---|"]
    for group in sorted(by_group):
        items = by_group[group]
        rejected = [r for r in items if r["verdict"] == "reject"]
        rules = Counter(code for r in rejected for code in {e["rule"] for e in r["errors"]})
        top = ", ".join(f"{c} {n}" for c, n in rules.most_common(6)) or "-"
        rate = 100.0 * len(rejected) / len(items) if items else 0.0
        lines.append(f"| {group} | {len(items)} | {len(rejected)} | {rate:.0f}% | {top} |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path, default=ROOT.parent / "shared" / "corpus")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--profile", default="default")
    ap.add_argument("--limit", type=int, default=0, help="first N files only")
    ap.add_argument("--dump", type=Path, help="write one JSON line per file")
    ap.add_argument("--write", action="store_true", help="update the table in docs/figures.md")
    args = ap.parse_args()
    items = rows(args.corpus)
    if args.limit:
        items = items[: args.limit]
    if not items:
        print(f"no corpus at {args.corpus}", file=sys.stderr)
        return 2
    meta = {i["path"]: i for i in items}
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        results = list(pool.map(check_one, [(i["path"], i["ref"], args.profile) for i in items], chunksize=8))
    text = table(results, meta)
    print(text)
    if args.dump:
        with args.dump.open("w") as fh:
            for r in results:
                fh.write(json.dumps({**r, **meta[r["path"]]}) + "\n")
    if args.write:
        readme = ROOT / "docs" / "figures.md"
        body = readme.read_text("utf-8")
        if MARK_START not in body:
            print("docs/figures.md has no corpus markers", file=sys.stderr)
            return 2
        head, rest = body.split(MARK_START, 1)
        _, tail = rest.split(MARK_END, 1)
        readme.write_text(f"{head}{MARK_START}\n{text}\n{MARK_END}{tail}", "utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
