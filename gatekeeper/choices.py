"""Command-line choices shared by several commands, kept free of heavy imports (pydantic,
libcst) so that `gatekeeper --version` and `--help` start fast."""

from __future__ import annotations

from enum import Enum


class ProfileName(str, Enum):
    """The profiles as a command-line choice (typer takes choices as an Enum); `check` and `ingest` share it."""

    strict = "strict"
    default = "default"
    lenient = "lenient"
