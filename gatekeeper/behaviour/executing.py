"""Attribution by executing code in the behaviour stage (issue 22 item 3), CPU runs.

Worker side: the submission's worker arms the program-counter sampler
(gatekeeper.runtime.pc_sampler) once, right after importing the submission, and keeps it
armed for the whole run, so that every call (checked trial, scheduled call) runs under the
same timer: nothing tells a sampled call from another. `executing()` marks the stretches to
keep: the submission's forward calls. At the end, `report()` sends one `executing` message
with the classes of what ran.

Parent side: `judge()` turns that message into the report's `work.executing` section and,
when the submission's own code ran for almost none of the compute samples, into the same
finding the dispatcher-based attribution gives (GK667), naming the objects that did run.
A replaced SIGPROF handler, a disarmed timer or blocked signals are interference (GK650).
"""

from __future__ import annotations

import contextlib
import os
from typing import TYPE_CHECKING, Any, Iterator, Optional

if TYPE_CHECKING:  # parent side only: the worker must not import the report schema (pydantic)
    from gatekeeper.report import Finding, Location

MIN_SAMPLES = 12  # fewer: the forward calls were too short to judge from samples (said, not judged)
COMPUTE = ("own", "torch", "vendor", "numpy")
DEFAULT_MIN_OWN_SHARE = 0.05
# The kernel checks CPU timers at its tick (1-10 ms), so a short run gives few samples. A
# finding needs both: the sampled own share under the minimum, and a 99% upper confidence
# bound under MEANINGFUL_SHARE, so that an honest submission whose own code does a real
# part of the work is not rejected for the luck of a few samples.
MEANINGFUL_SHARE = 0.5
ALPHA = 0.01


def upper_bound(k: int, n: int, alpha: float = ALPHA) -> float:
    """One-sided Clopper-Pearson upper bound on a share seen k times in n samples."""
    from math import comb

    if n <= 0:
        return 1.0
    if k >= n:
        return 1.0
    n_eff = min(n, 1000)
    k_eff = round(k * n_eff / n)

    def cdf(p: float) -> float:
        return sum(comb(n_eff, i) * p ** i * (1 - p) ** (n_eff - i) for i in range(k_eff + 1))

    low, high = k_eff / n_eff, 1.0
    for _ in range(60):  # P(X <= k; p) falls as p rises: bisect for alpha
        mid = (low + high) / 2
        if cdf(mid) > alpha:
            low = mid
        else:
            high = mid
    return high

_sampler: Any = None


def start(params: dict[str, Any], device: str) -> None:
    """In the worker, after the submission's import. CPU only: on a GPU the host PC says
    nothing about device work (CUPTI attributes kernels there)."""
    global _sampler
    library = params.get("pc_sampler")
    if not library or not device.startswith("cpu"):
        return
    try:
        from gatekeeper.runtime.pc_sampler import Sampler

        _sampler = Sampler(library)
        _sampler.start()
    except OSError:
        _sampler = None


@contextlib.contextmanager
def executing() -> Iterator[None]:
    """Around one forward call: its samples are kept."""
    if _sampler is None:
        yield
        return
    _sampler.record(True)
    try:
        yield
    finally:
        _sampler.record(False)


def report(channel: Any, params: dict[str, Any]) -> None:
    """At the end of the worker's run: one `executing` message."""
    global _sampler
    if _sampler is None:
        return
    sampler, _sampler = _sampler, None
    samples = sampler.stop()
    submission = params.get("submission") or ""
    roots = [os.environ.get("TORCH_EXTENSIONS_DIR", ""), os.path.dirname(os.path.realpath(submission))]
    attribution = sampler.attribute(samples, roots)
    channel.send("executing", intact=samples.intact, suppressed=samples.suppressed,
                 cpu_s=round(samples.cpu_s, 4), signals=samples.signals, **attribution.to_json())


def judge(messages: list[dict[str, Any]], settings: dict[str, Any],
          location: Optional[Location]) -> tuple[Optional[dict[str, Any]], list[Finding]]:
    """(the `work.executing` section or None, findings)."""
    from gatekeeper.report import StageName
    from gatekeeper.runtime.checks import finding

    stage = StageName.BEHAVIOUR

    seen = next((m for m in messages if m.get("kind") == "executing"), None)
    if seen is None:
        return None, []
    classes = dict(seen.get("classes") or {})
    compute = sum(classes.get(c, 0) for c in COMPUTE)
    own = classes.get("own", 0)
    section = {"samples": seen.get("samples", 0), "classes": classes, "objects": seen.get("objects", []),
               "symbols": seen.get("symbols", []),
               "own_share_of_compute": round(own / compute, 4) if compute else None}
    found: list[Finding] = []
    if not seen.get("intact", True) or seen.get("suppressed"):
        what = ("the SIGPROF handler was replaced or the profiling timer disarmed during a call"
                if not seen.get("intact", True) else
                f"the profiling signal was blocked: {seen.get('signals', 0)} signals in {seen.get('cpu_s')} s of CPU")
        found.append(finding("GK650", stage, {"sampler": section}, location,
                             when="while forward ran", names=f"the work-attribution sampler ({what})"))
        return section, found
    if compute < MIN_SAMPLES:
        section["judged"] = False
        section["why_not"] = f"{compute} compute samples over the forward calls; at least {MIN_SAMPLES} are needed"
        return section, found
    section["judged"] = True
    minimum = float(settings.get("min_own_share_executing", DEFAULT_MIN_OWN_SHARE))
    bound = upper_bound(own, compute)
    section["own_share_upper_99"] = round(bound, 4)
    if own / compute < minimum and bound < MEANINGFUL_SHARE:
        others = ", ".join(f"{name} {n}" for name, n in seen.get("objects", [])[:4])
        top = ", ".join(f"{name} {n}" for name, n in seen.get("symbols", [])[:3])
        detail = (f"sampled while forward ran, the submission's own code executed {own} of {compute} compute "
                  f"samples ({own / compute:.1%}); the rest ran in {others}" + (f" (top symbols: {top})" if top else ""))
        found.append(finding("GK667", stage, {"executing": section}, location, detail=detail,
                             trial="the sampled forward calls"))
    return section, found
