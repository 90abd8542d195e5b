from __future__ import annotations

from typing import Optional

from gatekeeper.report import Category, Severity
from gatekeeper.analyses.harness_patching import PatchRule
from gatekeeper.static.examples import Invalid, Valid, snippet


class PatchesBuiltins(PatchRule):
    """Replaces a builtin for the whole process: `builtins.print = f`,
    `__builtins__["print"] = f`, `__builtins__.len = f`, `setattr(builtins, "open", f)`,
    `builtins.__dict__.update(...)`, `mock.patch("builtins.print")`.

    Why it games the benchmark: builtins are shared with the harness, so a replaced
    `print`, `open`, `isinstance`, `abs` or `max` changes what the harness reports, reads,
    or decides (a fake benchmark line, a comparison that always passes).

    Not flagged: a module-level name that shadows a builtin inside the submission only
    (`print = logger.info`, `def max(a, b): ...`); that changes nothing outside it.
    """

    code = "GK412"
    name = "PatchesBuiltins"
    category = Category.HARNESS_TAMPERING
    severity = Severity.ERROR
    summary = "replaces a Python builtin for the whole process"
    message = "The builtin `{name}` is replaced ({how}): {what}."
    hint = (
        "Remove the write to `builtins` / `__builtins__`. If you need a helper, give it your own "
        "name in your module; never change `print`, `open` or other builtins for the harness."
    )
    VALID = [
        Valid(snippet("""
            import logging
            print = logging.getLogger(__name__).info
        """)),
        Valid(snippet("""
            def max(a, b):
                return a if a > b else b
        """)),
        Valid(snippet("""
            import builtins
            n = builtins.len([1, 2])
        """)),
    ]
    INVALID = [
        Invalid(snippet("""
            import builtins
            builtins.print = lambda *a, **k: None
        """), line=2, message="The builtin `builtins.print` is replaced (assignment)"),
        Invalid("__builtins__['print'] = lambda *a, **k: None\n", line=1, message="The builtin `builtins.print` is replaced (assignment)"),
        Invalid(snippet("""
            import builtins as b
            setattr(b, 'isinstance', lambda *a: True)
        """), line=2, message="The builtin `builtins.isinstance` is replaced (setattr)"),
        Invalid("__builtins__.abs = lambda x: 0\n", line=1, message="The builtin `builtins.abs` is replaced (assignment)"),
        Invalid(snippet("""
            import builtins
            builtins.__dict__.update(max=lambda *a: 0)
        """), line=2, message="The builtin `builtins.max` is replaced (__dict__.update)"),
    ]

    def sensitive(self, qual: str) -> Optional[str]:
        if qual == "builtins" or qual.startswith("builtins."):
            return "builtins are shared with the harness, which would call the replacement"
        return None
