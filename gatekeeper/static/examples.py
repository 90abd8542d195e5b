"""A rule's examples, in Fixit's style: `Valid(source)` must not be flagged, and
`Invalid(source, line=..., message=...)` must be flagged at that line with a message
containing that fragment, so an example proves where the rule points and what it says,
not only that it fired somewhere.

    INVALID = [
        Invalid(snippet('''
            import torch
            x = eval(s)
        '''), line=2, message="eval"),
    ]

Plain strings are still accepted in VALID / INVALID (user rule folders written before
these classes existed); `as_valid` / `as_invalid` turn them into objects without a
location. Built-in rules use the objects (tests/test_rule_examples.py checks).

The dedent helper is `snippet`, not `code`: inside a rule class `code` is the rule's code
("GK101"), which would shadow an imported `code()` in the class body.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from typing import Optional, Union


def snippet(block: str) -> str:
    """A triple-quoted block as source: the common indentation removed and the newline
    right after the opening quotes dropped, so examples are written as indented code."""
    text = textwrap.dedent(block)
    return text[1:] if text.startswith("\n") else text


@dataclass(frozen=True)
class Valid:
    """Source the rule must not flag (a near miss)."""

    source: str


@dataclass(frozen=True)
class Invalid:
    """Source the rule must flag. `line` (1-based, in `source`) is where a finding of the
    rule must point, `message` a fragment its message must contain, `col` (1-based,
    optional) its column. None means "not stated" (plain-string examples only)."""

    source: str
    line: Optional[int] = None
    message: Optional[str] = None
    col: Optional[int] = None


Example = Union[str, Valid, Invalid]


def as_valid(example: Example) -> Valid:
    if isinstance(example, Valid):
        return example
    if isinstance(example, Invalid):
        raise TypeError("an Invalid example is listed in VALID")
    return Valid(example)


def as_invalid(example: Example) -> Invalid:
    if isinstance(example, Invalid):
        return example
    if isinstance(example, Valid):
        raise TypeError("a Valid example is listed in INVALID")
    return Invalid(example)


def source_of(example: Example) -> str:
    """The example's source, whatever form it was written in."""
    return example if isinstance(example, str) else example.source
