"""Find rule classes: the built-in rule pack (the top-level rules/ folder, installed as the
package `gatekeeper_rules`) plus user rule folders.

Built-in rules are imported by their package name, so each module exists once in
sys.modules; user rule files are loaded by path under a synthetic name. A rule class is
any Rule subclass with a `code`. Codes must be unique across all folders.
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
import sys
from functools import lru_cache
from pathlib import Path
from typing import Iterable

from gatekeeper.errors import UsageError
from gatekeeper.static.load_checks import LOAD_RULES
from gatekeeper.static.rule import Rule

BUILTIN_PACKAGE = "gatekeeper_rules"


def _builtin_folder() -> Path:
    try:
        package = importlib.import_module(BUILTIN_PACKAGE)
    except ImportError:
        # A source tree on sys.path without an install: the folder beside the package.
        return Path(__file__).resolve().parent.parent.parent / "rules"
    return Path(next(iter(package.__path__)))


BUILTIN_RULES = _builtin_folder()


def _rule_classes(module, path: Path) -> list[type[Rule]]:
    found = []
    for value in vars(module).values():
        if (isinstance(value, type) and issubclass(value, Rule) and value is not Rule
                and "code" in value.__dict__ and value.__module__ == module.__name__):
            value.source_file = str(path)
            found.append(value)
    return found


def _load_builtin() -> list[type[Rule]]:
    if BUILTIN_PACKAGE not in sys.modules and importlib.util.find_spec(BUILTIN_PACKAGE) is None:
        return [rule for path in sorted(BUILTIN_RULES.glob("gk*.py")) for rule in _load_file(path)]
    package = importlib.import_module(BUILTIN_PACKAGE)
    found: list[type[Rule]] = []
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda i: i.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{BUILTIN_PACKAGE}.{info.name}")
        found.extend(_rule_classes(module, Path(module.__file__ or info.name)))
    return found


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
    return _rule_classes(module, path)


@lru_cache(maxsize=16)
def _discover(folders: tuple[str, ...]) -> tuple[type[Rule], ...]:
    rules: list[type[Rule]] = [*LOAD_RULES, *_load_builtin()]
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
    return _discover(tuple(str(Path(d)) for d in extra_dirs))
