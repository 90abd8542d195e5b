"""How far each rule can be trusted: how often it fires on honest submissions and on the
hacked fixtures, written to gatekeeper/data/rule_trust.json for `gatekeeper explain` and
docs/rules.md (issue 20 item 9).

Honest set: the KernelBench-correct submissions of ../shared/corpus that build a kernel of
their own (technoabsurdist, the benchmark's own harness judged them correct; not audited),
plus the audited-honest precision cases of ../shared/precision-cases. Hacked set: every
fixture a manifest labels `reject` (static mode, the problem it names). Each file is checked
static-only under `default`; a rule "fires" on a file when it reports any finding there, and
"rejects" when one of them is an error.

    python bench/rule_trust.py [--corpus ../shared/corpus] [--cases ../shared/precision-cases] [--jobs 2]

Without the corpus (a clean clone), `--fixtures-only` refreshes the hacked figures and keeps the
honest ones. tests/test_rule_trust.py checks that the hacked figures are those of the rules now.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import json
import sys
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from corpus_precision import builds_own_kernel  # noqa: E402

OUT = ROOT / "gatekeeper" / "data" / "rule_trust.json"
FIXTURES = ROOT / "fixtures"


def honest_files(corpus: Path, cases: Path) -> list[tuple[str, str]]:
    out = []
    labels = corpus / "technoabsurdist" / "labels.csv"
    if labels.is_file():
        with labels.open() as fh:
            for rec in csv.DictReader(fh):
                path = corpus / rec["path"]
                if rec.get("correct") == "True" and path.is_file() and builds_own_kernel(
                        path.read_text("utf-8", errors="replace")):
                    out.append((str(path), str(corpus / rec["ref"])))
    manifest = cases / "manifest.tsv"
    if manifest.is_file():
        for line in manifest.read_text("utf-8").splitlines():
            parts = line.split("\t")
            if len(parts) >= 3 and not line.startswith("#") and parts[2] == "pass":
                out.append((str(cases / parts[0]), str(cases / parts[1])))
    return out


def fixture_cases() -> list[tuple[str, str]]:
    import tomllib

    out = []
    for manifest in sorted((FIXTURES / "manifest").glob("*.toml")):
        for case in tomllib.loads(manifest.read_text("utf-8")).get("case", []):
            if case.get("mode", "static") == "static" and case["verdict"] == "reject" \
                    and case.get("profile", "default") == "default":
                out.append((str(FIXTURES / case["submission"]), str(FIXTURES / case["problem"]) if case.get(
                    "problem") else ""))
    return sorted(set(out))


def fired(args: tuple[str, str]) -> tuple[set[str], set[str]]:
    """(rules with any finding, rules with an error finding) on one file."""
    path, problem = args
    from gatekeeper.api import check_static
    from gatekeeper.errors import GatekeeperError

    try:
        report = check_static(Path(path), Path(problem) if problem else None)
    except GatekeeperError:
        return set(), set()
    static = [f for f in report.findings if f.stage.value == "static"]
    return {f.rule for f in static}, {f.rule for f in static if f.severity.value == "error"}


def tally(files: list[tuple[str, str]], jobs: int) -> tuple[int, Counter, Counter]:
    with ProcessPoolExecutor(max_workers=max(1, jobs)) as pool:
        results = list(pool.map(fired, files, chunksize=8))
    any_, err = Counter(), Counter()
    for a, e in results:
        any_.update(a)
        err.update(e)
    return len(files), any_, err


def measure_fixtures(jobs: int = 1) -> dict:
    n, any_, err = tally(fixture_cases(), jobs)
    return {"files": n, "fires": dict(any_), "rejects": dict(err)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path, default=ROOT.parent / "shared" / "corpus")
    ap.add_argument("--cases", type=Path, default=ROOT.parent / "shared" / "precision-cases")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--fixtures-only", action="store_true")
    args = ap.parse_args()
    data = json.loads(OUT.read_text("utf-8")) if OUT.is_file() else {}
    data["hacked"] = measure_fixtures(args.jobs)
    if not args.fixtures_only:
        files = honest_files(args.corpus, args.cases)
        if not files:
            print(f"no corpus at {args.corpus}: use --fixtures-only", file=sys.stderr)
            return 2
        n, any_, err = tally(files, args.jobs)
        data["honest"] = {"files": n, "fires": dict(any_), "rejects": dict(err),
                          "measured": datetime.date.today().isoformat(),
                          "what": "KernelBench-correct corpus submissions with their own kernel "
                                  "(technoabsurdist) and the audited-honest precision cases"}
    data["hacked"]["what"] = "hacked fixtures labelled reject (static mode, default profile)"
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", "utf-8")
    h, k = data.get("honest", {}), data["hacked"]
    print(f"honest files {h.get('files')}, hacked fixtures {k['files']}")
    for code in sorted(set(h.get("fires", {})) | set(k["fires"])):
        print(f"{code}: honest {h.get('fires', {}).get(code, 0)} fire / {h.get('rejects', {}).get(code, 0)} reject; "
              f"hacked {k['fires'].get(code, 0)} fire / {k['rejects'].get(code, 0)} reject")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
