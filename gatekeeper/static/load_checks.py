"""Findings about the submission file itself, made before any rule can run."""

from __future__ import annotations

from gatekeeper.report import Category, Severity
from gatekeeper.static.rule import Rule


class _LoadRule(Rule):
    category = Category.BUILD_FAILURE
    severity = Severity.ERROR
    source_file = __file__


class SubmissionNotText(_LoadRule):
    """The submission does not decode as Python source text: not UTF-8 and not in the
    encoding its first two lines declare (PEP 263), or it holds NUL bytes (a binary, an
    archive). A file Python imports is never flagged: a declared latin-1 file is text."""

    code = "GK001"
    name = "SubmissionNotText"
    summary = "submission file is not Python source text (UTF-8 or its declared encoding)"
    message = "The submission is not Python source text, so it cannot be a Python module."
    hint = ("Submit the Python source file that defines `ModelNew`, saved as UTF-8 (or with its encoding "
            "declared on line 1 or 2, e.g. `# -*- coding: latin-1 -*-`).")


class SubmissionTooLarge(_LoadRule):
    """The submission exceeds `max_file_bytes`. Real kernels are a few hundred lines; a
    multi-megabyte file is an attempt to exhaust the checker or to hide code in bulk."""

    code = "GK002"
    name = "SubmissionTooLarge"
    summary = "submission file exceeds the size limit"
    message = "The submission is larger than the configured limit and was not analysed."
    hint = "Keep the submission to the kernel and its wrapper; move nothing generated into it."


class SubmissionSyntaxError(_LoadRule):
    """The submission does not parse as Python."""

    code = "GK003"
    name = "SubmissionSyntaxError"
    summary = "submission is not valid Python"
    message = "The submission does not parse as Python."
    hint = "Fix the syntax error at the reported line; run `python -m py_compile` on it first."


class SubmissionEmpty(_LoadRule):
    """The submission has no code."""

    code = "GK004"
    name = "SubmissionEmpty"
    summary = "submission is empty"
    message = "The submission contains no code."
    hint = "Submit a module that defines `class ModelNew(torch.nn.Module)` with a `forward`."


LOAD_RULES: tuple[type[Rule], ...] = (
    SubmissionNotText, SubmissionTooLarge, SubmissionSyntaxError, SubmissionEmpty,
)
