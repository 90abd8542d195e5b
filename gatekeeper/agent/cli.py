"""`gatekeeper mcp`: registered into the main CLI when this package is present."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    @app.command("mcp")
    def mcp_command() -> None:
        """Serve the agent tools (static_check, compile, run_correctness, submit) over MCP stdio."""
        try:
            from gatekeeper.agent.server import serve_stdio
        except ImportError as exc:
            from gatekeeper.distribution import pip_install

            typer.echo(f"gatekeeper mcp: the `mcp` package is needed ({exc}); "
                       f"install it with `{pip_install('agent')}`", err=True)
            raise typer.Exit(2)
        try:
            serve_stdio()
        except KeyboardInterrupt:
            pass
