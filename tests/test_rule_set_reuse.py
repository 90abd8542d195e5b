"""The engine reuses one instance of each rule from file to file (engine._RuleSet). A reused
rule must behave as a new one: no state carried between files, handlers switched off for
one file only, and no instance shared by two checks that run at the same time."""

import sys
import threading
from pathlib import Path

import libcst as cst

from gatekeeper.config import Config
from gatekeeper.report import Category, Severity
from gatekeeper.static import engine
from gatekeeper.static.problem_facts import load_problem_facts
from gatekeeper.static.rule import Rule
from gatekeeper.static.stage import run_static

ROOT = Path(__file__).resolve().parent.parent
PROBLEM = ROOT / "fixtures" / "problems" / "seed_mean.py"
SUBMISSIONS = sorted((ROOT / "fixtures" / "submissions").glob("*.py"))


class CountsCalls(Rule):
    """Reports every call after the first of a file; switches its call handler off for a
    file that says `# quiet`."""

    code = "GKT01"
    name = "counts-calls"
    category = Category.HARNESS_TAMPERING
    message = "call"
    hint = "none"

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.seen = 0
        if "# quiet" in self.ctx.text:
            self.visit_Call = None  # type: ignore[assignment]

    def visit_Call(self, node: cst.Call) -> None:
        self.seen += 1
        if self.seen > 1:
            self.report(node)


def _run(source: str) -> list[int]:
    module = cst.parse_module(source)
    found = engine.run_rules(
        module, path="x.py", text=source, rule_classes=[CountsCalls], profile="default",
        settings={}, severities={"GKT01": Severity.ERROR}, problem=None, folder=None,
    )
    return [f.location.line for f in found if f.location]


def test_a_reused_rule_starts_each_file_afresh():
    two_calls = "f()\ng()\n"
    assert _run(two_calls) == [2]
    assert _run(two_calls) == [2]  # `seen` did not carry over from the last file


def test_a_handler_switched_off_for_one_file_runs_again_for_the_next():
    source = "f()\ng()\nh()\n"
    assert _run(source) == [2, 3]
    assert _run("# quiet\n" + source) == []
    assert _run(source) == [2, 3]


def test_findings_do_not_depend_on_the_files_checked_before():
    config, problem = Config(), load_problem_facts(PROBLEM)

    def dump(path: Path) -> list:
        return [f.model_dump() for f in run_static(path.read_bytes(), str(path), config, problem)]

    first = {path: dump(path) for path in SUBMISSIONS}
    assert any(first.values())
    for path in reversed(SUBMISSIONS):
        assert dump(path) == first[path], path.name


def test_concurrent_checks_never_share_rule_instances():
    config, problem = Config(), load_problem_facts(PROBLEM)
    expected = {p: [f.model_dump() for f in run_static(p.read_bytes(), str(p), config, problem)] for p in SUBMISSIONS}
    failures: list[str] = []

    def worker(order: list[Path]) -> None:
        for _ in range(3):
            for path in order:
                try:
                    got = [f.model_dump() for f in run_static(path.read_bytes(), str(path), config, problem)]
                except Exception as exc:  # a shared instance breaks mid-file as often as it misreports
                    failures.append(f"{path.name}: {exc!r}")
                    continue
                if got != expected[path]:
                    failures.append(path.name)

    threads = [threading.Thread(target=worker, args=(SUBMISSIONS[i::2] + SUBMISSIONS[:i],)) for i in range(4)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # switch threads often, so that races show up on any machine
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
    assert failures == []
