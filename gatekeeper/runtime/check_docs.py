"""`gatekeeper explain` for the run-time codes (GK6xx behaviour and build, GK7xx timing):
what each check observes, why it matters, a flagged and a clean example.

Kept in the package (not read from docs/ at run time) so that an installed wheel explains
every code. The fix is the check's own hint. The texts live in three modules by family;
tests/test_explain_every_code.py checks that every run-time code of the catalogue has one.
"""

from __future__ import annotations

from typing import Optional

from gatekeeper.runtime.check_docs_output import OUTPUT_DOCS
from gatekeeper.runtime.check_docs_process import PROCESS_DOCS
from gatekeeper.runtime.check_docs_timing import TIMING_DOCS
from gatekeeper.runtime.doc_parts import CheckDoc

__all__ = ["CheckDoc", "doc_for"]


def doc_for(code: str) -> Optional[CheckDoc]:
    return OUTPUT_DOCS.get(code) or PROCESS_DOCS.get(code) or TIMING_DOCS.get(code)
