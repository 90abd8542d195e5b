from __future__ import annotations

from typing import Optional

import libcst as cst

from gatekeeper.report import Category, Severity
from gatekeeper.rules.gk4_support import UseRule

_AVAILABILITY = ("importlib.util.find_spec", "importlib.metadata", "importlib.resources")


class ImportsDynamically(UseRule):
    """Imports through the import machinery instead of an `import` statement:
    `__import__(...)`, `importlib.import_module`, `importlib.reload`,
    `importlib.util.spec_from_file_location` / `module_from_spec`, `importlib.machinery`,
    the old `imp` module, `pkgutil` loaders.

    Why it games the benchmark: the imported name is a string the static rules cannot
    follow (it can be assembled or decoded), so it hides imports of the reference, of
    `subprocess` or of harness modules, and loading a module from a file path runs code
    that is not part of the submission.

    Not flagged: plain `import` statements (also inside `try/except ImportError`).
    `importlib.util.find_spec`, `importlib.metadata` and `importlib.resources` only ask
    whether a package exists or read its metadata: a warning.
    """

    code = "GK431"
    name = "ImportsDynamically"
    category = Category.DYNAMIC_CODE
    severity = Severity.ERROR
    summary = "imports modules through __import__ or importlib"
    message = "`{name}` imports a module by a run-time name, which hides what is imported from every check."
    hint = (
        "Use plain `import x` / `from x import y` statements at the top of the file. If an "
        "optional package may be missing, wrap a plain import in `try/except ImportError`."
    )
    NAMES = ("builtins.__import__", "importlib", "imp", "pkgutil.get_loader", "pkgutil.find_loader",
             "pkgutil.iter_modules", "pkgutil.walk_packages", "zipimport")
    VALID = [
        "try:\n    import triton\nexcept ImportError:\n    triton = None\n",
        "import torch\nfrom torch.utils.cpp_extension import load_inline\n",
    ]
    INVALID = [
        "mod = __import__('subprocess')\n",
        "import importlib\nref = importlib.import_module('reference')\n",
        "from importlib import util\nspec = util.spec_from_file_location('r', '/tmp/r.py')\n",
        "import importlib as il\nname = 'o' + 's'\nos_mod = il.import_module(name)\n",
        "from importlib import reload\nimport torch\nreload(torch)\n",
    ]

    def describe(self, qual: str, entry: str, node: cst.CSTNode) -> Optional[tuple[str, Optional[Severity]]]:
        if any(qual == a or qual.startswith(a + ".") for a in _AVAILABILITY):
            return (f"`{qual}` is used; it only checks whether a package exists, but a plain "
                    "`import` in `try/except ImportError` says the same without importlib.", Severity.WARNING)
        return self.message.format(name=qual.replace("builtins.", "")), None
