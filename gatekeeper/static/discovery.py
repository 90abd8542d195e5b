"""Find rule classes: the built-in gatekeeper/rules/ folder plus user rule folders.

Rules are loaded by path, one module per file; a rule class is any Rule subclass with a
`code`. Codes must be unique across all folders.
"""

from __future__ import annotations

import importlib.util
import sys
from functools import lru_cache
from pathlib import Path
from typing import Iterable

from gatekeeper.errors import UsageError
from gatekeeper.static.load_checks import LOAD_RULES
from gatekeeper.static.rule import Rule

BUILTIN_RULES = Path(__file__).resolve().parent.parent / "rules"


def _load_file(path: Path) -> list[type[Rule]]:
    module_name = f"gatekeeper_rules_{abs(hash(str(path)))}_{path.stem}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise UsageError(f"cannot load rule file {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # a user's rule file is broken: say which, don't crash
        raise UsageError(f"rule file {path} failed to import: {type(exc).__name__}: {exc}") from None
    found = []
    for value in vars(module).values():
        if isinstance(value, type) and issubclass(value, Rule) and value is not Rule and "code" in value.__dict__:
            value.source_file = str(path)
            found.append(value)
    return found


@lru_cache(maxsize=16)
def _discover(folders: tuple[str, ...]) -> tuple[type[Rule], ...]:
    rules: list[type[Rule]] = list(LOAD_RULES)
    for folder in folders:
        base = Path(folder)
        if not base.is_dir():
            raise UsageError(f"rule directory not found: {folder}")
        for path in sorted(base.glob("*.py")):
            if path.name.startswith("_"):
                continue
            rules.extend(_load_file(path))
    by_code: dict[str, type[Rule]] = {}
    for rule in rules:
        if rule.code in by_code:
            other = by_code[rule.code]
            raise UsageError(
                f"rule code {rule.code} is defined twice: {other.__name__} ({other.source_file}) "
                f"and {rule.__name__} ({rule.source_file}); give each rule its own code"
            )
        by_code[rule.code] = rule
    return tuple(sorted(rules, key=lambda r: r.code))


def discover_rules(extra_dirs: Iterable[str] = ()) -> tuple[type[Rule], ...]:
    return _discover((str(BUILTIN_RULES), *[str(Path(d)) for d in extra_dirs]))
