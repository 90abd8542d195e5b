"""The first compiler error of a failed build, mapped back into the Python file.

load_inline writes `main.cpp` (one `#include <torch/extension.h>` line, then cpp_sources
joined by newlines) and `cuda.cu` (three include lines, then cuda_sources); a compiler line
`.../main.cpp:12:5: error: ...` is line 11 of the cpp_sources text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

from gatekeeper.build.sources import Extracted, python_line

# gcc/clang write `file:line:col: error: ...`; nvcc's front end writes `file(line): error: ...`
# (and `catastrophic error` for a missing include).
_ERROR = re.compile(r"^(?P<file>[^\s:()]+\.(?:cpp|cu|cuh|h|hpp|cc))"
                    r"(?::(?P<line>\d+):(?:(?P<col>\d+):)?|\((?P<nvcc_line>\d+)\):)"
                    r"\s*(?:fatal |catastrophic )?error[:\s](?P<msg>.*)$", re.MULTILINE)
_PREFIX_LINES = {"main.cpp": 1, "cuda.cu": 3}


@dataclass
class CompileError:
    file: str
    line: int
    column: Optional[int]
    message: str
    source_line: str
    python_line: Optional[int]


def first_error(output: str, extracted: Optional[Extracted]) -> Optional[CompileError]:
    match = _ERROR.search(output)
    if match is None:
        return None
    file = match.group("file").rsplit("/", 1)[-1]
    line = int(match.group("line") or match.group("nvcc_line"))
    column = int(match.group("col")) if match.group("col") else None
    message = match.group("msg").strip()
    source_line, py_line = "", None
    if extracted is not None and file in _PREFIX_LINES:
        kind = "cpp" if file == "main.cpp" else "cuda"
        wanted = line - _PREFIX_LINES[file]
        for source in extracted.sources:
            if source.kind != kind or source.origin == "string literal":
                continue
            offset = _offset_of_line(source.text, wanted)
            if offset is not None:
                source_line = source.line_in_source(offset)
                py_line = python_line(extracted, source, offset)
                break
    return CompileError(file, line, column, message, source_line, py_line)


def _offset_of_line(text: str, line: int) -> Optional[int]:
    if line < 1:
        return None
    offset = 0
    for _ in range(line - 1):
        offset = text.find("\n", offset)
        if offset < 0:
            return None
        offset += 1
    return offset if offset <= len(text) else None
