from __future__ import annotations

from gatekeeper.report import Category, Severity
from gatekeeper.analyses.harness_support import UseRule
from gatekeeper.static.examples import Invalid, Valid, snippet


class ReadsGarbageCollector(UseRule):
    """Asks the garbage collector for live objects: `gc.get_objects()`,
    `gc.get_referrers()`, `gc.get_referents()`, `gc.garbage`, through any alias.

    Why it games the benchmark: every tensor in the process is reachable this way, the
    reference output and the harness's saved inputs included, so the submission can find
    the expected answer and return it.

    Not flagged: `gc.collect()`, `gc.disable()` / `gc.enable()` and `gc.freeze()`, which
    manage memory without reading other objects.
    """

    code = "GK422"
    name = "ReadsGarbageCollector"
    category = Category.INTROSPECTION
    severity = Severity.ERROR
    summary = "reads live objects through the garbage collector"
    message = "`{name}` is used: it reaches every object in the process, including the harness's expected output."
    hint = (
        "Remove the `gc` object walk. Compute the result from `forward`'s arguments; `gc.collect()` "
        "alone is fine if you need to free memory."
    )
    NAMES = ("gc.get_objects", "gc.get_referrers", "gc.get_referents", "gc.garbage")
    VALID = [
        Valid(snippet("""
            import gc, torch
            gc.collect()
            torch.cuda.empty_cache()
        """)),
        Valid(snippet("""
            import gc
            gc.disable()
        """)),
    ]
    INVALID = [
        Invalid(snippet("""
            import gc, torch
            def find():
                return [o for o in gc.get_objects() if torch.is_tensor(o)]
        """), line=3, message="`gc.get_objects` is used"),
        Invalid(snippet("""
            from gc import get_referrers as refs
            def who(x):
                return refs(x)
        """), line=3, message="`gc.get_referrers` is used"),
        Invalid(snippet("""
            import gc as g
            def walk(x):
                return g.get_referents(x)
        """), line=3, message="`gc.get_referents` is used"),
    ]
