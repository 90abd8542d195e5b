"""Generate README.md's per-category detection table from the fixture manifest.

    python scripts/coverage_table.py            # print the table
    python scripts/coverage_table.py --write    # replace the block in README.md

Every static-mode fixture is checked with the real static stage. Per category: how many
hacked fixtures were caught in that category (rejected outright by a certain finding, or held:
an unconfirmed suspicion in the category that names the run-time check that settles it, see
docs/verdicts.md), how many honest near misses stayed free of error findings, and which
rules fired. tests/test_coverage_table.py fails when README.md's
block differs from what this prints, so the table cannot drift from the fixtures.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

import gatekeeper
from gatekeeper.report import Category

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
START, END = "<!-- coverage:start -->", "<!-- coverage:end -->"
# Honest fixtures name the category they come close to with `near`; older entries are
# matched by a word in their file name.
_NAME_HINTS = {
    "stream": "stream-escape", "thread": "thread-injection", "lazy": "lazy-output",
    "precision": "precision-downgrade", "tamper": "harness-tampering", "introspect": "introspection",
    "dyncode": "dynamic-code", "escape": "sandbox-escape", "reuse": "reference-reuse",
    "shape": "hardcoded-shape", "fallback": "torch-fallback", "cached": "cached-output", "seed": "cached-output",
}


def cases() -> list[dict]:
    out = []
    for manifest in sorted((FIXTURES / "manifest").glob("*.toml")):
        for case in tomllib.loads(manifest.read_text("utf-8")).get("case", []):
            if case.get("mode", "static") == "static":
                out.append(case)
    return out


def near_category(case: dict) -> str | None:
    if case.get("near"):
        return case["near"]
    stem = Path(case["submission"]).stem
    for word, category in _NAME_HINTS.items():
        if word in stem.split("_"):
            return category
    return None


def table() -> str:
    caught: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])  # rejected, held, of
    clean: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    rules: dict[str, set[str]] = defaultdict(set)
    for case in cases():
        problem = FIXTURES / case["problem"] if case.get("problem") else None
        report = gatekeeper.check_static(FIXTURES / case["submission"], problem, profile=case.get("profile", "default"))
        errors = report.errors()
        held = report.unconfirmed()
        if case["verdict"] == "reject":
            for category in case["categories"]:
                hits = [f for f in errors if f.category.value == category]
                kept = [f for f in held if f.category.value == category and f.probe and f.probe.check]
                caught[category][2] += 1
                caught[category][0] += bool(hits)
                caught[category][1] += bool(kept) and not hits
                rules[category].update(f.rule for f in hits + kept)
        else:
            category = near_category(case) or "other"
            clean[category][1] += 1
            clean[category][0] += not errors
    lines = [
        "| category | hacked fixtures rejected | held for a run-time check | honest near misses clean "
        "| rules that fired |",
        "|---|---|---|---|---|",
    ]
    order = [c.value for c in Category] + ["other"]
    for category in order:
        if category not in caught and category not in clean:
            continue
        hack = caught.get(category, [0, 0, 0])
        honest = clean.get(category, [0, 0])
        lines.append(
            f"| {category} | {hack[0]} / {hack[2]} | {hack[1]} | {honest[0]} / {honest[1]} | "
            f"{', '.join(sorted(rules.get(category, []))) or '-'} |"
        )
    return "\n".join(lines)


def readme_block(text: str) -> str:
    start, end = text.index(START) + len(START), text.index(END)
    return text[start:end].strip()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    generated = table()
    if not args.write:
        print(generated)
        return
    readme = ROOT / "README.md"
    text = readme.read_text("utf-8")
    start, end = text.index(START) + len(START), text.index(END)
    readme.write_text(text[:start] + "\n" + generated + "\n" + text[end:], "utf-8")
    print(f"updated {readme}")


if __name__ == "__main__":
    main()
