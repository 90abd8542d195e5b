"""Trial names as a reader understands them, for run-time messages.

The behaviour stage names its calls `nominal`, `nominal-second`, `jitter-2`, `schedule`...;
a message that says "on jitter-2" tells the user nothing. Every `trial` field of a message,
and every "the output of <trial>" inside another field, is written out here, with the
call's input shapes when the evidence has them.
"""

from __future__ import annotations

import re
from typing import Any

_FIXED = {
    "nominal": "the first call (the problem's nominal inputs)",
    "nominal-second": "a second call with new inputs of the nominal shapes",
    "nominal-overwrite": "a call after the first call's inputs were overwritten in place",
    "repeat": "a repeat of the first call's inputs",
    "import": "import (loading the module and building ModelNew)",
    "schedule": "the scheduled calls with new inputs",
}
_JITTER = re.compile(r"jitter-(\d+)\Z")
_TRIAL_WORD = r"(?:nominal-second|nominal-overwrite|nominal|repeat|jitter-\d+)"
_OUTPUT_OF = re.compile(rf"\bthe output of ({_TRIAL_WORD})\b")


def describe(trial: str, shapes: Any = None) -> str:
    """'jitter-2' -> 'the call with jittered shapes (set 2; input shapes [4, 20, 40])'."""
    text = str(trial)
    match = _JITTER.match(text)
    if match:
        base = f"the call with jittered shapes (set {match.group(1)}"
        return base + (f"; input shapes {_shapes(shapes)})" if shapes else ")")
    if text in _FIXED:
        described = _FIXED[text]
        return described + (f" (input shapes {_shapes(shapes)})" if shapes and text.startswith("nominal") else "")
    if text.startswith("schedule"):
        return _FIXED["schedule"]
    return f"the call {text!r}"


def _shapes(shapes: Any) -> str:
    if isinstance(shapes, (list, tuple)):
        return ", ".join(str(list(s)) if isinstance(s, (list, tuple)) else str(s) for s in shapes)
    return str(shapes)


def readable_fields(fields: dict[str, Any], evidence: dict[str, Any]) -> dict[str, Any]:
    """The message fields with trial names written out; the raw name stays in the evidence."""
    out = dict(fields)
    if "trial" in out:
        evidence.setdefault("trial", out["trial"])
        # A template that prints {shapes} itself gets the trial without them.
        out["trial"] = describe(out["trial"], None if "shapes" in fields else evidence.get("shapes"))
    for key, value in out.items():
        if key != "trial" and isinstance(value, str) and "the output of" in value:
            out[key] = _OUTPUT_OF.sub(lambda m: "the output of " + describe(m.group(1)), value)
    return out
