"""gatekeeper: says whether a GPU-kernel submission's speedup is real."""

from gatekeeper.api import check, check_static
from gatekeeper.report import Category, Finding, Report, Severity, Verdict
from gatekeeper.version import __version__

__all__ = ["check", "check_static", "Report", "Finding", "Category", "Severity", "Verdict", "__version__"]
