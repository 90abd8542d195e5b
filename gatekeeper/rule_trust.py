"""How far a rule can be trusted, as measured by bench/rule_trust.py: how often it fires on
honest submissions and on the hacked fixtures. Read by `gatekeeper explain` and docs/rules.md;
the figures ship inside the package (gatekeeper/data/rule_trust.json)."""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from typing import Any, Optional


@lru_cache(maxsize=1)
def _data() -> dict[str, Any]:
    try:
        text = resources.files("gatekeeper").joinpath("data/rule_trust.json").read_text("utf-8")
        return json.loads(text)
    except (OSError, ValueError):
        return {}


def trust_line(code: str) -> Optional[str]:
    """One sentence with the figures for `code`, or None when none were measured."""
    data = _data()
    honest, hacked = data.get("honest"), data.get("hacked")
    if not honest or not hacked:
        return None
    parts = []
    n = honest.get("files", 0)
    if n:
        fires, rejects = honest["fires"].get(code, 0), honest["rejects"].get(code, 0)
        parts.append(f"fires on {fires} of {n} honest submissions ({rejects} as an error)")
    m = hacked.get("files", 0)
    if m:
        parts.append(f"on {hacked['fires'].get(code, 0)} of {m} hacked fixtures "
                     f"({hacked['rejects'].get(code, 0)} as an error)")
    if not parts:
        return None
    return (f"Measured ({honest.get('measured', '?')}, static stage, default profile, bench/rule_trust.py): "
            + "; ".join(parts) + ".")
