"""End-to-end speed of `gatekeeper check DIR --static-only --jobs 1 -f json` against bare
`libcst.parse_module` on the same files, on one core (issue 20 item 8).

    python bench/bench_cli_static.py [--corpus ../shared/corpus] [--files 1000] [--rounds 3]
                                     [--dir /tmp/gk-cli-bench] [--other /path/to/other/checkout]

The files are the first --files .py submissions of the corpus (technoabsurdist, then
hzeng2000, each in sorted path order, empty files included as they come), copied into
`DIR/sub/<kb version>/<level>/<reference stem>/fNNNN.py`. `DIR/gatekeeper.toml` maps each
file to its corpus reference with one `[[problem_map]]` entry, so the run is what a user
runs: every file is checked against its own reference, nothing is switched off.

Each round times, alternately, bare parsing of all the texts in this process and the CLI
as a subprocess (console script, wall clock from spawn to exit, process start, report
building and JSON output included). Both are pinned to the first CPU this process may use.
The ratio is CLI files/s over bare-parse files/s of the same round. `--other` runs
another checkout's CLI (via PYTHONPATH; its rules/ too) in the same rounds, for A/B figures on a shared,
loaded machine where absolute rates swing. Every timed tree's bytecode is compiled first: with
PYTHONDONTWRITEBYTECODE set (as on the development machine) a fresh checkout, or a module edited since
its last compile, would otherwise be compiled again on every run and charged to that tree.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import libcst

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ("technoabsurdist", "hzeng2000")


def _labels(corpus: Path) -> dict[str, str]:
    """Submission path (relative to the corpus) -> its reference (relative)."""
    import csv

    refs: dict[str, str] = {}
    for source in SOURCES:
        with (corpus / source / "labels.csv").open() as fh:
            refs.update({rec["path"]: rec["ref"] for rec in csv.DictReader(fh)})
    return refs


def build(corpus: Path, folder: Path, limit: int) -> list[Path]:
    """Copy the submissions into `folder` in the problem_map layout; returns the copies."""
    corpus = corpus.resolve()
    refs = _labels(corpus)
    if folder.exists():
        shutil.rmtree(folder)
    out: list[Path] = []
    for source in SOURCES:
        for path in sorted((corpus / source).rglob("*.py")):
            rel = path.relative_to(corpus).as_posix()
            if rel not in refs or len(out) >= limit:
                continue
            ref = Path(refs[rel])  # refs/<version>/<level>/<stem>.py
            version, level, stem = ref.parts[1], ref.parts[2], ref.stem
            dest = folder / "sub" / version / level / stem / f"f{len(out):04d}.py"
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, dest)
            out.append(dest)
    (folder / "gatekeeper.toml").write_text(
        "[[problem_map]]\n"
        'submissions = "sub/{version}/{level}/{ref}/*.py"\n'
        f'problem = "{corpus}/refs/{{version}}/{{level}}/{{ref}}.py"\n')
    return out


def bare_parse(texts: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds of parsing every text once, in this process."""
    start, cpu = time.perf_counter(), time.process_time()
    for text in texts:
        libcst.parse_module(text)
    return time.perf_counter() - start, time.process_time() - cpu


def cli(folder: Path, tree: Path | None, expected: int) -> tuple[float, float]:
    """Wall and CPU (user + system) seconds of one CLI run over the folder (run from `folder`,
    so its config is found)."""
    script = Path(sys.executable).with_name("gatekeeper")
    cmd = [str(script)] if script.is_file() else [sys.executable, "-m", "gatekeeper"]
    env = dict(os.environ)
    if tree is not None:
        # The editable install maps `gatekeeper_rules` to the main checkout's rules/; a folder
        # on PYTHONPATH that links the other checkout's rules/ under that name comes first.
        shim = folder / "_trees" / str(abs(hash(str(tree.resolve()))))
        if not (shim / "gatekeeper_rules").exists():
            shim.mkdir(parents=True, exist_ok=True)
            (shim / "gatekeeper_rules").symlink_to(tree.resolve() / "rules")
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(tree), str(shim), env.get("PYTHONPATH")) if p)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(cmd + ["check", "sub", "--static-only", "--jobs", "1", "-f", "json"], cwd=folder,
                          env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    took = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    try:  # 0 pass, 1 rejects, with a JSON list of reports; anything else is gatekeeper failing
        reports = json.loads(proc.stdout) if proc.returncode in (0, 1) else None
    except ValueError:
        reports = None
    if not isinstance(reports, list) or len(reports) != expected:
        sys.exit(f"gatekeeper ({tree or 'installed'}) exited {proc.returncode} without {expected} reports: "
                 f"{proc.stderr.decode()[-2000:]}")
    return took, cpu


def _rates(name: str, parse: tuple[float, float], run: tuple[float, float], n: int) -> str:
    (pw, pc), (cw, cc) = parse, run
    return (f"{name}: wall: bare parse {n / pw:6.1f} files/s, CLI {n / cw:6.1f} files/s, ratio {pw / cw:.3f} | "
            f"cpu: bare parse {n / pc:6.1f}, CLI {n / cc:6.1f}, ratio {pc / cc:.3f}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--corpus", type=Path, default=ROOT.parent / "shared" / "corpus")
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dir", type=Path, default=Path("/tmp/gk-cli-bench"))
    parser.add_argument("--other", type=Path, action="append", default=[],
                        help="another checkout to time in the same rounds (A/B); may be given more than once")
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):  # inherited by the CLI subprocess
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    for tree in [ROOT, *args.other]:
        for part in ("gatekeeper", "rules"):
            compileall.compile_dir(str(tree / part), quiet=1)
    files = build(args.corpus, args.dir, args.files)
    texts = [f.read_text("utf-8", errors="replace") for f in files]
    n = len(texts)
    print(f"{n} files, one core, load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    # Wall clock is what a user sees; CPU time (user + system) is printed beside it because on
    # a loaded machine wall time also counts the time other processes held the core.
    for i in range(args.rounds):
        parse = bare_parse(texts)
        this = cli(args.dir, None, n)
        print(f"round {i + 1}: {_rates('this', parse, this, n)}", flush=True)
        for tree in args.other:
            other = cli(args.dir, tree, n)
            print(f"         {_rates(str(tree), bare_parse(texts), other, n)}", flush=True)
    print(f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
