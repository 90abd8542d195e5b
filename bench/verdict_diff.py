"""Verdict equality of two checkouts on the static CLI benchmark's folder (issue 20 item 8):
a speed change must leave every verdict and finding as it was.

    python bench/verdict_diff.py --other /path/to/baseline/checkout [--dir /tmp/gk-cli-bench]

Runs `gatekeeper check sub --static-only --jobs 1 -f json` from `--dir` (built by
bench_cli_static.py) once with this checkout and once with `--other` (each through PYTHONPATH,
its rules/ too, as bench_cli_static.py does), then compares per file the verdict and the sorted
(rule, severity, line, message) of its findings, and the whole reports less stage durations.
Exits 1 on any difference, printing the first few.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def _reports(tree: Path, folder: Path) -> dict[str, dict[str, Any]]:
    """This tree's reports over `folder`, by submission path, with stage durations dropped."""
    with tempfile.TemporaryDirectory() as shim:
        (Path(shim) / "gatekeeper_rules").symlink_to(tree.resolve() / "rules")
        env = dict(os.environ, PYTHONPATH=os.pathsep.join((str(tree.resolve()), shim)))
        proc = subprocess.run([sys.executable, "-m", "gatekeeper", "check", "sub", "--static-only", "--jobs", "1",
                               "-f", "json"], cwd=folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if proc.returncode not in (0, 1):
        sys.exit(f"gatekeeper ({tree}) exited {proc.returncode}: {proc.stderr.decode()[-2000:]}")
    out = {}
    for report in json.loads(proc.stdout):
        for stage in report["stages"]:
            stage.pop("duration_s", None)  # the only field that differs between two runs
        out[report["submission"]["path"]] = report
    return out


def _key(report: dict[str, Any]) -> tuple:
    return report["verdict"], sorted(
        (f["rule"], f["severity"], (f.get("location") or {}).get("line"), f["message"]) for f in report["findings"])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--other", type=Path, required=True, help="the baseline checkout")
    parser.add_argument("--dir", type=Path, default=Path("/tmp/gk-cli-bench"))
    args = parser.parse_args()
    mine, theirs = _reports(ROOT, args.dir), _reports(args.other, args.dir)
    if mine.keys() != theirs.keys():
        sys.exit(f"different files checked: {len(mine)} here, {len(theirs)} in {args.other}")
    verdicts = [p for p in mine if _key(mine[p]) != _key(theirs[p])]
    whole = [p for p in mine if mine[p] != theirs[p]]
    print(f"{len(mine)} files: {len(verdicts)} differ in verdict or findings, {len(whole)} in the whole report")
    for path in (verdicts or whole)[:5]:
        print(f"{path}\n  here:  {json.dumps(mine[path])[:600]}\n  other: {json.dumps(theirs[path])[:600]}")
    sys.exit(1 if verdicts or whole else 0)


if __name__ == "__main__":
    main()
