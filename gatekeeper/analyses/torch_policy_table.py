"""The torch-fallback policy as data (torch_policy.toml), read once and cached.

Not a rule file: it defines no rule with a `code`. `policy()` gives the per-profile
verdict of each situation; `render_table()` is the table the GK3xx rule docs show.
"""

from __future__ import annotations

import sys
from fnmatch import fnmatchcase
from functools import lru_cache
from pathlib import Path
from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict

from gatekeeper.report import Confidence, Severity

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

TABLE = Path(__file__).resolve().with_name("torch_policy.toml")
PROFILES = ("strict", "default", "lenient")


class Verdict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    severity: Literal["error", "warning"]
    confidence: Confidence

    @property
    def level(self) -> Severity:
        return Severity(self.severity)


class Situation(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    text: str
    strict: Verdict
    default: Verdict
    lenient: Verdict

    def for_profile(self, profile: str) -> Verdict:
        return getattr(self, profile if profile in PROFILES else "default")


class Policy(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    confirmed_by: str
    situations: dict[str, Situation]
    families: dict[str, list[str]]

    def verdict(self, situation: str, profile: str) -> Verdict:
        return self.situations[situation].for_profile(profile)

    def family(self, op: str) -> str:
        """The family an op belongs to (`linear` and `mm` are both `matmul`), else the op."""
        key = op.lower().replace("_", "").rstrip(".")
        found = _FAMILY_CACHE.get(key)
        if found is None:
            found = next((name for name, patterns in self.families.items()
                          if any(fnmatchcase(key, p) for p in patterns)), key)
            _FAMILY_CACHE[key] = found
        return found


_FAMILY_CACHE: dict[str, str] = {}


@lru_cache(maxsize=1)
def policy() -> Policy:
    return Policy.model_validate(tomllib.loads(TABLE.read_text("utf-8")))


def render_table(names: Optional[tuple[str, ...]] = None) -> str:
    """The policy as a text table (for rule docs): situation, then strict/default/lenient."""
    data = policy()
    rows = [(s.text, *(f"{v.severity} ({v.confidence.value})" for v in (s.strict, s.default, s.lenient)))
            for key, s in data.situations.items() if names is None or key in names]
    width = max(len(r[0]) for r in rows)
    head = f"    {'situation'.ljust(width)}  {'strict':<18}{'default':<18}lenient"
    lines = [head] + [f"    {a.ljust(width)}  {b:<18}{c:<18}{d}" for a, b, c, d in rows]
    return "\n".join(lines)
