"""The parse skips libcst's per-node validation, and nothing else changes."""

from __future__ import annotations

import threading
from pathlib import Path

import libcst as cst
import pytest

from gatekeeper.static.parse_screen import safe_parse
from gatekeeper.static.validation_pause import node_validation_paused

ROOT = Path(__file__).resolve().parent.parent


def _invalid_node() -> None:
    cst.Name("not a name")  # libcst's validation rejects spaces in a Name


def test_trees_parsed_without_validation_equal_validated_ones():
    sources = sorted((ROOT / "fixtures").rglob("*.py"))[:80]
    assert len(sources) >= 20
    for path in sources:
        text = path.read_text("utf-8")
        try:
            validated = cst.parse_module(text)
        except cst.ParserSyntaxError:
            continue
        fast = safe_parse(text)
        assert fast.deep_equals(validated), path
        assert fast.code == validated.code, path


def test_validation_is_back_after_a_parse_and_after_an_error():
    safe_parse("x = 1\n")
    with pytest.raises(cst.CSTValidationError):
        _invalid_node()
    with pytest.raises(cst.ParserSyntaxError):
        safe_parse("def (:\n")
    with pytest.raises(cst.CSTValidationError):
        _invalid_node()


def test_nested_and_concurrent_pauses_restore_validation():
    barrier = threading.Barrier(4)
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            for _ in range(50):
                with node_validation_paused():
                    barrier.wait(timeout=10) if _ == 0 else None
                    with node_validation_paused():
                        cst.parse_module("y = [1, 2]\n")
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    with pytest.raises(cst.CSTValidationError):
        _invalid_node()


def test_a_post_init_installed_by_someone_else_still_runs_outside_the_pause():
    from gatekeeper.static import validation_pause

    safe_parse("x = 1\n")  # the hook is in place
    before, wrapped = cst.CSTNode.__dict__["__post_init__"], validation_pause._validate
    seen: list[str] = []

    def theirs(self) -> None:
        seen.append(type(self).__name__)
        self._validate()

    cst.CSTNode.__post_init__ = theirs
    try:
        safe_parse("y = 2\n")  # paused: neither theirs nor the validation runs
        assert seen == []
        cst.Name("z")
        assert seen == ["Name"]
        with pytest.raises(cst.CSTValidationError):
            _invalid_node()
    finally:
        cst.CSTNode.__post_init__, validation_pause._validate = before, wrapped
