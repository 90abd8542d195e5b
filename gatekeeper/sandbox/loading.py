"""Import a file as a fresh module (used inside workers for submissions and problems)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, Optional


def load_module(path: str, name: str, source: Optional[str] = None,
                inject: Optional[dict[str, Any]] = None) -> ModuleType:
    """Execute `source` (or the file's text) as module `name` with `__file__` = path.

    `inject` puts names into the module's globals before its code runs (the jitter object).
    """
    file = Path(path)
    # utf-8-sig: a byte-order mark is valid in a Python file (the interpreter skips it) but
    # compile() of a str that starts with U+FEFF fails.
    text = source if source is not None else file.read_text("utf-8-sig")
    text = text.removeprefix("\ufeff")
    spec = importlib.util.spec_from_loader(name, loader=None, origin=str(file))
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    module.__file__ = str(file)
    module.__dict__.update(inject or {})
    sys.modules[name] = module
    code = compile(text, str(file), "exec")
    exec(code, module.__dict__)
    return module


def load_submission(path: str) -> ModuleType:
    """Import a submission the way `python solution.py` would: its own folder first on
    sys.path, so the modules it ships beside it (`from kernels import f`, a `csrc/` package)
    import as they do for the user. gatekeeper.submission_files checks those modules statically."""
    folder = str(Path(path).resolve().parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    return load_module(path, "gk_submission")
