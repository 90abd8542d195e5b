"""Regenerate the sample outputs shown in the docs, so they cannot drift from the tool.

A sample is a fenced block between `<!-- sample: NAME -->` and `<!-- /sample -->` in a
Markdown file; NAME is a key of SAMPLES below, which says how to produce its text by running
the real thing (the CLI, an example, an agent tool). Lines longer than WIDTH characters are
cut at a word boundary and end in " ..." (the cut is ours, not the tool's).

    python scripts/doc_samples.py            # --check: exit 1 and show a diff if a sample drifted
    python scripts/doc_samples.py --write    # rewrite the blocks in place
"""

from __future__ import annotations

import argparse
import difflib
import re
import subprocess
import sys
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent
SEED = "fixtures/submissions/seed_cached_hardcoded.py"
SEED_PROBLEM = "fixtures/problems/seed_mean.py"
WIDTH = 150
BLOCK = re.compile(r"(<!-- sample: (?P<name>[\w-]+) -->\n)```\n.*?```\n(<!-- /sample -->)", re.S)


def _run(*argv: str) -> str:
    done = subprocess.run([sys.executable, *argv], capture_output=True, text=True, cwd=ROOT, timeout=600,
                          env={"PATH": "/usr/bin:/bin", "NO_COLOR": "1", "COLUMNS": "100"})
    return done.stdout


def _agent_loop() -> str:
    return "$ python examples/agent_loop.py --via mcp\n" + _run("examples/agent_loop.py", "--via", "mcp")


def _mcp_summary() -> str:
    sys.path.insert(0, str(ROOT))
    from gatekeeper.agent.summary import summarise
    from gatekeeper.agent.tools import static_check

    report = static_check((ROOT / SEED).read_text("utf-8"), (ROOT / SEED_PROBLEM).read_text("utf-8"))
    return summarise(report) + "\n"


def _seed_check() -> str:
    return (f"$ gatekeeper check {SEED} --problem {SEED_PROBLEM} -q\n"
            + _run("-m", "gatekeeper", "check", SEED, "--problem", SEED_PROBLEM, "-q"))


SAMPLES: dict[str, Callable[[], str]] = {
    "agent-loop": _agent_loop,
    "mcp-summary": _mcp_summary,
    "seed-check-quiet": _seed_check,
}


def _cut(text: str) -> str:
    lines = []
    for line in text.rstrip("\n").splitlines():
        if len(line) > WIDTH:
            line = line[:WIDTH].rsplit(" ", 1)[0] + " ..."
        lines.append(line)
    return "\n".join(lines) + "\n"


def render(path: Path, cache: dict[str, str]) -> str:
    text = path.read_text("utf-8")

    def fill(match: re.Match) -> str:
        name = match["name"]
        if name not in SAMPLES:
            raise SystemExit(f"{path}: unknown sample {name!r}; known: {', '.join(SAMPLES)}")
        if name not in cache:
            cache[name] = _cut(SAMPLES[name]())
        return f"{match[1]}```\n{cache[name]}```\n{match[3]}"

    return BLOCK.sub(fill, text)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="rewrite the blocks instead of checking them")
    args = parser.parse_args()
    cache: dict[str, str] = {}
    drift = 0
    for path in sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")]):
        old = path.read_text("utf-8")
        if "<!-- sample:" not in old:
            continue
        new = render(path, cache)
        if new == old:
            continue
        drift += 1
        if args.write:
            path.write_text(new, "utf-8")
            print(f"rewrote {path.relative_to(ROOT)}")
        else:
            sys.stdout.writelines(difflib.unified_diff(old.splitlines(True), new.splitlines(True),
                                                       str(path.relative_to(ROOT)), "generated"))
    if drift and not args.write:
        print(f"\n{drift} file(s) show sample output that the tool no longer prints; "
              "run `python scripts/doc_samples.py --write` and commit the result", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
