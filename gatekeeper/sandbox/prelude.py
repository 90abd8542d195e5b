"""What every worker that imports a submission loads before the submission runs.

The checking worker (gatekeeper.behaviour.subject_job) and the timing worker
(gatekeeper.timing.jobs:submission_job) import the same harness modules here, so a
submission that looks at `sys.modules` (or `nn.Module.__subclasses__()`) cannot tell which
of the two it is in and arm a shortcut only when timed (issue 15, "A timing process that
looks like a check"). Neither holds the reference problem or its `Model`. Add a module here
when either job starts importing it lazily after the submission has loaded;
tests/test_timing_fresh_blocks.py compares the two processes' module lists.
"""

from __future__ import annotations

import importlib

HARNESS = (
    "gatekeeper.behaviour.subject_job",
    "gatekeeper.behaviour.schedule_subject",
    "gatekeeper.behaviour.attribution",
    "gatekeeper.behaviour.observe",
    "gatekeeper.problem.shims",
    "gatekeeper.sandbox.loading",
    "gatekeeper.sandbox.tensors",
    "gatekeeper.timing.jobs",
    "gatekeeper.timing.blocks",
    "gatekeeper.timing.fresh",
    "gatekeeper.timing.method",
    "gatekeeper.timing.l2",
)


def load_harness() -> None:
    """Import every harness module either submission worker uses (missing ones are skipped,
    for installations without a stage)."""
    for name in HARNESS:
        try:
            importlib.import_module(name)
        except ImportError:
            continue
