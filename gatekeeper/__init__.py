"""gatekeeper: says whether a GPU-kernel submission's speedup is real."""

from typing import TYPE_CHECKING, Any

from gatekeeper.version import __version__

if TYPE_CHECKING:
    from gatekeeper.api import check, check_static
    from gatekeeper.report import Category, Finding, Report, Severity, Verdict

__all__ = ["check", "check_static", "Report", "Finding", "Category", "Severity", "Verdict", "__version__"]

# Loaded on first use (PEP 562): `gatekeeper --version` imports this package, and the API
# pulls in pydantic, libcst and the engine (about 1 s on a busy machine).
_LAZY = {"check": "gatekeeper.api", "check_static": "gatekeeper.api", "Category": "gatekeeper.report",
         "Finding": "gatekeeper.report", "Report": "gatekeeper.report", "Severity": "gatekeeper.report",
         "Verdict": "gatekeeper.report"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'gatekeeper' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
