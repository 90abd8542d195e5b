"""Planning: turn a source's records into work, skipping what the store already holds.

Every good record is mapped in the store (source id -> bytes sha256, code key, problem);
its result key is (code key, problem sha256) under the run key. A key the store already
holds is done; a key already queued in this run is shared; only new keys become tasks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Union

from gatekeeper.ingest.normalise import normalised_sha, sha256_bytes
from gatekeeper.ingest.pool import Task
from gatekeeper.ingest.problems import ProblemFile
from gatekeeper.ingest.records import BadRecord, Record
from gatekeeper.ingest.store import RunKey, Store


@dataclass
class TaskInfo:
    code_key: str
    submission_sha256: str
    problem: ProblemFile
    source_id: str


@dataclass
class Plan:
    tasks: list[Task] = field(default_factory=list)
    info: dict[int, TaskInfo] = field(default_factory=dict)
    records: int = 0
    bad: int = 0
    done: int = 0  # records whose result was already stored
    shared: int = 0  # records that share a result queued in this run
    retried: int = 0


def _unknown_problem(name: str, problems: dict[str, ProblemFile]) -> str:
    known = ", ".join(sorted(problems)[:8]) + (", ..." if len(problems) > 8 else "")
    return f"unknown problem {name!r}: no {name}.py in the problems folder (known: {known})"


def make_plan(items: Iterable[Union[Record, BadRecord]], *, source: str, problems: dict[str, ProblemFile],
              store: Store, run_key: RunKey, max_bytes: int, dedupe: bool, retry_errors: bool) -> Plan:
    plan = Plan()
    done = store.done_keys(run_key)
    queued: set[tuple[str, str]] = set()
    first_seen: dict[str, str] = {}
    retry: set[tuple[str, str]] = set()
    for problem in problems.values():
        store.add_problem(problem.sha256, problem.name, str(problem.path))
    for item in items:
        plan.records += 1
        if isinstance(item, Record):
            problem_name = item.problem[:-3] if item.problem.endswith(".py") else item.problem
            data = item.code.encode("utf-8")
            message = None
            if item.source_id in first_seen:
                message = (f"{item.ref}: id {item.source_id!r} appears again (first at {first_seen[item.source_id]}); "
                           "ids must be unique within a source; skipped")
            elif problem_name not in problems:
                message = f"{item.ref}: {_unknown_problem(problem_name, problems)}"
            elif len(data) > max_bytes:
                message = (f"{item.ref}: code is {len(data):,} bytes, over the {max_bytes:,}-byte limit "
                           "(max_file_bytes in the configuration)")
            if message is not None:
                item = BadRecord(ref=item.ref, message=message, source_id=item.source_id, problem=item.problem)
        if isinstance(item, BadRecord):
            plan.bad += 1
            store.add_input_error(source, item.ref, item.source_id, item.problem, item.message)
            continue
        first_seen[item.source_id] = item.ref
        problem = problems[problem_name]
        submission_sha = sha256_bytes(data)
        code_key = (normalised_sha(item.code) if dedupe else None) or submission_sha
        store.add_submission(source, item.source_id, problem.name, problem.sha256, submission_sha, code_key, item.code)
        if item.model is not None or item.author is not None:
            store.add_meta(source, item.source_id, item.model, item.author)
        key = (code_key, problem.sha256)
        if key in done:
            if not retry_errors:
                plan.done += 1
                continue
            retry.add(key)
        if key in queued:
            plan.shared += 1
            continue
        queued.add(key)
        index = len(plan.tasks)
        plan.tasks.append(Task(i=index, code=item.code, problem=str(problem.path)))
        plan.info[index] = TaskInfo(code_key, submission_sha, problem, item.source_id)
    store.flush()
    if retry:
        # Only error rows are dropped and redone; a stored pass or reject is final.
        plan.retried = store.forget_errors(run_key, retry)
        still_done = store.done_keys(run_key) & retry
        keep = [t for t in plan.tasks if (plan.info[t.i].code_key, plan.info[t.i].problem.sha256) not in still_done]
        plan.done += len(plan.tasks) - len(keep)
        plan.tasks = keep
    return plan
