"""The MCP server's static backstop follows `[limits] static_timeout_s` (issue 12): it is the
configured limit plus a margin, so the static stage's own limit (a report naming the rule
that was running) always fires before the server stops the worker with a bare "did not
finish". Real configuration files, read from the working directory as the tools read them."""

from __future__ import annotations

import pytest

pytest.importorskip("mcp")

from gatekeeper.agent.server import STATIC_MARGIN_S, build_server, static_backstop_s  # noqa: E402
from gatekeeper.config import Config  # noqa: E402


def test_the_backstop_is_the_configured_static_limit_plus_the_margin(tmp_path, monkeypatch):
    (tmp_path / "gatekeeper.toml").write_text("[limits]\nstatic_timeout_s = 100\n")
    monkeypatch.chdir(tmp_path)
    assert STATIC_MARGIN_S >= 10
    assert static_backstop_s() == 100 + STATIC_MARGIN_S
    server = build_server()
    try:
        assert server.gk_workers.static.timeout_s == 100 + STATIC_MARGIN_S
    finally:
        server.gk_workers.close()


def test_without_a_configuration_the_backstop_is_above_the_default_limit(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    default = Config().limits.static_timeout_s
    assert static_backstop_s(tmp_path) == default + STATIC_MARGIN_S > default


def test_an_invalid_configuration_keeps_the_default_backstop(tmp_path):
    # The tool call itself reports the invalid file as a usage error; the server keeps going.
    (tmp_path / "gatekeeper.toml").write_text("[limits]\nstatic_timeout_s = -1\n")
    assert static_backstop_s(tmp_path) == Config().limits.static_timeout_s + STATIC_MARGIN_S
