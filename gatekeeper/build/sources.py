"""What a submission compiles: its C++/CUDA sources (through the static engine's extraction)
and the text of its loader calls (names and flags), for the build cache key and error mapping."""

from __future__ import annotations

import hashlib
import platform
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import libcst as cst

from gatekeeper.static.parse_screen import ParseRefused, safe_parse
from gatekeeper.static.context import FileContext
from gatekeeper.static.cpp_sources import CppSource
from gatekeeper.static.engine import scan_file  # the engine's own extraction
from gatekeeper.static.positions import positions_for

_LOADERS = ("load_inline", "load")


@dataclass
class Extracted:
    module: cst.Module
    sources: list[CppSource] = field(default_factory=list)
    loader_calls: list[str] = field(default_factory=list)

    @property
    def compiles(self) -> bool:
        return bool(self.loader_calls)

    @property
    def needs_cuda(self) -> bool:
        return any(s.kind == "cuda" and s.origin != "string literal" for s in self.sources) or any(
            "cuda_sources" in call or ".cu'" in call or '.cu"' in call for call in self.loader_calls)

    def cache_key(self) -> str:
        digest = hashlib.sha256()
        for part in [platform.python_version(), _torch_version(), *toolchain_identity()] + self.loader_calls + [
                s.text for s in self.sources]:
            digest.update(part.encode("utf-8", errors="surrogatepass"))
            digest.update(b"\0")
        return digest.hexdigest()[:32]


def toolchain_identity() -> list[str]:
    """What else torch's own extension hash depends on: the interpreter and the torch install
    (its include paths are build arguments) and the compiler settings. Two environments that
    share a cache (two virtualenvs, a CI clone) otherwise see a build marked done that torch
    then rebuilds inside the import phase, where a slow compile is a timeout on the submission."""
    import importlib.util
    import os
    import sys

    spec = importlib.util.find_spec("torch")  # locates the package without importing it
    where = str(Path(spec.origin).resolve().parent) if spec is not None and spec.origin else "?"
    env = [f"{k}={os.environ.get(k, '')}" for k in ("CC", "CXX", "CUDAHOSTCXX", "CUDA_HOME", "TORCH_CUDA_ARCH_LIST")]
    return [os.path.realpath(sys.executable), where, *env]


def _torch_version() -> str:
    try:
        from importlib import metadata

        return metadata.version("torch")
    except Exception:
        return "?"


class _Calls(cst.CSTVisitor):
    def __init__(self, module: cst.Module) -> None:
        self.module = module
        self.calls: list[str] = []

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        name = func.value if (type(func) is cst.Name) else func.attr.value if (type(func) is cst.Attribute) else ""
        if name in _LOADERS:
            self.calls.append(self.module.code_for_node(node))


def extract(data: bytes, path: str) -> Optional[Extracted]:
    """None when the file does not parse (the static stage has said so already)."""
    try:
        text = data.decode("utf-8")
        module = safe_parse(text, data)  # screened: libcst's parser must not crash the checker
    except (UnicodeDecodeError, cst.ParserSyntaxError, ParseRefused):
        return None
    folder = Path(path).parent if path != "<submission>" else None
    ctx = FileContext(path=path, text=text, module=module, profile="default", problem=None, folder=folder)
    scan_file(ctx, module)
    calls = _Calls(module)
    module.visit(calls)
    return Extracted(module, list(ctx.cpp_sources), calls.calls)


def extract_bundle(data: bytes, path: str) -> Optional[Extracted]:
    """`extract` over the submission and the modules it ships beside it (gatekeeper/submission_files.py):
    an extension loaded from `kernels.py` is the submission's too, and its sources are part
    of the build cache key."""
    from gatekeeper.submission_files import local_modules

    main = extract(data, path)
    if main is None:
        return None
    for module in local_modules(data.decode("utf-8", errors="replace"), path):
        try:
            more = extract(module.read_bytes(), str(module))
        except OSError:
            continue
        if more is not None:
            main.sources.extend(more.sources)
            main.loader_calls.extend(more.loader_calls)
    return main


def python_line(extracted: Extracted, source: CppSource, offset: int) -> Optional[int]:
    """The line in the Python file of character `offset` of `source`'s text."""
    segment = source.segment_at(offset)
    if segment.node is None:
        return None
    ranges = positions_for(extracted.module, [segment.node])
    where = ranges.get(id(segment.node))
    if where is None:
        return None
    return where.start.line + segment.text.count("\n", 0, max(0, offset - segment.start))
