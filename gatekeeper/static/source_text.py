"""A submission's bytes as text, the way Python reads a module (PEP 263, PEP 3120).

UTF-8 unless a byte-order mark or a `# -*- coding: NAME -*-` comment on line 1 or 2 says
otherwise: a latin-1 file with its declaration imports, so it must not be rejected as "not
text". Bytes that do not decode are reported at a line and column (and the byte offset),
the way an editor shows them, not at a bare byte offset.
"""

from __future__ import annotations

import codecs
import io
import tokenize
from dataclasses import dataclass
from typing import Optional, Union


@dataclass(frozen=True)
class Undecodable:
    detail: str  # a sentence for the finding's message
    line: Optional[int] = None
    column: Optional[int] = None
    source_line: Optional[str] = None


def decode_source(data: bytes) -> Union[str, Undecodable]:
    """The text of `data`, or why it is not Python source text."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as exc:  # an unknown encoding name, or a declaration contradicting the BOM
        return Undecodable(f"Its encoding declaration cannot be used: {exc.msg}.", line=exc.lineno or 1, column=1)
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as exc:
        return _where(data, exc, encoding)
    except LookupError:  # detect_encoding checks the name; a codec that vanished is still not text
        return Undecodable(f"Its declared encoding {encoding!r} is not available.")
    return text[1:] if encoding == "utf-8-sig" and text.startswith("\ufeff") else text


def _where(data: bytes, exc: UnicodeDecodeError, encoding: str) -> Undecodable:
    start = exc.start
    line_start = data.rfind(b"\n", 0, start) + 1
    line = data.count(b"\n", 0, start) + 1
    line_end = data.find(b"\n", start)
    raw_line = data[line_start:line_end if line_end >= 0 else len(data)]
    # The column in characters, as an editor counts them: the bytes before it, decoded leniently.
    column = len(codecs.decode(data[line_start:start], encoding, errors="replace")) + 1
    shown = raw_line.decode(encoding, errors="replace").rstrip("\r")
    name = "UTF-8" if encoding.replace("_", "-").lower() in ("utf-8", "utf-8-sig") else encoding
    return Undecodable(
        f"Line {line}, column {column} (byte {start}): byte 0x{data[start]:02x} is not valid {name}. Save the "
        f"file as UTF-8, or declare its encoding on line 1 or 2 (`# -*- coding: latin-1 -*-`) as Python allows.",
        line=line, column=column, source_line=shown)
