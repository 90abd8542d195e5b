"""Compile the fixture extensions of the run-mode manifest cases once per test session, in a
background process at the lowest CPU priority (tests/conftest.py starts it; issue 21, item 12).

On a fresh clone every C++ fixture is a cold compile (about 20 s each on a 2-core machine,
mostly parsing torch's headers, one core busy); the tests ran them one after another in the
foreground. Here they are built while the tests before them run, into the same build cache
(`GATEKEEPER_CACHE_DIR`, default ~/.cache/gatekeeper) through the build stage itself, so the
cache keys and the markers are the ones the tests look up. It first makes the precompiled
torch/extension.h that the suite's builds use (gatekeeper/build/pch.py; conftest switches it on). Nothing is skipped: a test whose
extension is not built yet builds it as before (the build folder's lock makes the two wait
for each other, never build twice at once).

Only cases whose manifest entry says the build succeeds are warmed: a case that expects a
build failure or a timeout would hold the build folder's lock for its whole (long) limit.

One warm-up per machine at a time: under pytest-xdist every worker process collects the
run-mode cases and starts one; the first takes a lock in the build cache and the others
exit at once (two would compile the same extensions in turn, each waiting on the other's
folder lock, and take the CPU time the tests leave idle twice).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Iterator

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
_BUILD_MAY_NOT_FINISH = {"build-failure", "timeout"}


def cases() -> Iterator[tuple[Path, Path]]:
    """(submission, problem) of every run-mode case whose build is expected to finish, in the
    order tests/test_fixtures.py runs them."""
    for manifest in sorted((FIXTURES / "manifest").glob("*.toml")):
        for case in tomllib.loads(manifest.read_text("utf-8")).get("case", []):
            if case.get("mode", "static") != "run" or not case.get("problem"):
                continue
            if _BUILD_MAY_NOT_FINISH & set(case.get("categories", [])) or "build_timeout_s" in case.get("limits", {}):
                continue
            yield FIXTURES / case["submission"], FIXTURES / case["problem"]


def main() -> int:
    import fcntl

    from gatekeeper.build.cache import cache_root

    cache_root().mkdir(parents=True, exist_ok=True)
    lock = open(cache_root() / "warm_builds.lock", "w")  # held until this process ends
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return 0  # another session's or worker's warm-up is building these already
    # The precompiled torch header first, at the tests' priority: every C++ build after it
    # (the tests' and ours) takes ~12 s less CPU; builds that start before it is ready go
    # without it. Then the fixture builds, at the lowest priority.
    from gatekeeper.build.pch import prepare

    prepare(True, cuda=False)
    os.nice(19)
    return _warm()


def _warm() -> int:
    import gatekeeper
    from gatekeeper.build.cache import cuda_present, is_built
    from gatekeeper.build.sources import extract

    for submission, problem in cases():
        extracted = extract(submission.read_bytes(), str(submission))
        if extracted is None or not extracted.compiles or (extracted.needs_cuda and not cuda_present()):
            continue
        if is_built(extracted.cache_key()):
            continue
        try:
            gatekeeper.check(submission, problem, stages="build", keep_going=True)
        except Exception as exc:  # a warm-up only: the test of this case reports what is wrong
            print(f"warm_builds: {submission.name}: {exc}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
