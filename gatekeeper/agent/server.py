"""The MCP server over stdio: `gatekeeper mcp`.

Each tool returns the summary for the agent as its first text block and the Report JSON
as its second (also as structured content, for clients that read it). A usage error comes
back as a tool error result with the message; an internal error likewise, saying it is
not a verdict. Neither stops the server: submissions are parsed and run only in worker
processes (gatekeeper.agent.worker), never in the server itself.
"""

from __future__ import annotations

import threading
from contextlib import asynccontextmanager
from typing import Annotated, Any, AsyncIterator, Literal, Optional

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent
from pydantic import Field

from gatekeeper.agent.worker import Worker, WorkerCrashed
from gatekeeper.agent.summary import summarise
from gatekeeper.errors import GatekeeperError
from gatekeeper.report import Report
from gatekeeper.version import __version__

Code = Annotated[str, Field(description="the full source of your submission: a Python module defining ModelNew")]
Problem = Annotated[str, Field(description="the full source of the reference problem: defines Model, get_inputs, get_init_inputs")]
OptProblem = Annotated[Optional[str], Field(description="the reference problem's source; lets the rules know its sizes")]
Profile = Annotated[Optional[Literal["strict", "default", "lenient"]],
                    Field(description="strict (RL training), default, or lenient; default: the configured profile")]
Seed = Annotated[Optional[int], Field(description="reproduce an earlier run's random inputs")]

INSTRUCTIONS = (
    "gatekeeper checks a GPU-kernel submission (a ModelNew class) against its reference problem "
    "and says whether its speedup would be real. Call static_check after every edit (milliseconds), "
    "compile when it passes, run_correctness to test on fresh jittered inputs, and submit for the full "
    "gate (timed when a GPU is present). Each finding's hint says what to write instead."
)


STATIC_TIMEOUT_S = 60.0  # static rules take milliseconds; a minute means something is wrong
HEAVY_TIMEOUT_S = 3600.0  # the stages keep their own, shorter, timeouts; this is a backstop


class _Workers:
    """Static checks in one worker process, compile/run/submit in another (one at a time:
    they share the compiler, the CPU and the GPU), so a static check never waits for them."""

    def __init__(self) -> None:
        self.static = Worker("static", STATIC_TIMEOUT_S)
        self.heavy = Worker("stages", HEAVY_TIMEOUT_S)

    def close(self) -> None:
        self.static.close()
        self.heavy.close()


def _result(report: Report) -> CallToolResult:
    payload = report.model_dump(mode="json")
    return CallToolResult(
        content=[TextContent(type="text", text=summarise(report)),
                 TextContent(type="text", text=report.model_dump_json(indent=2))],
        structured_content=payload,
    )


async def _call(worker: Worker, function: str, **kwargs: Any) -> CallToolResult:
    try:
        text = await anyio.to_thread.run_sync(lambda: worker.call(function, **kwargs))
    except WorkerCrashed as exc:
        raise ToolError(f"checker crashed: {exc}") from None
    except GatekeeperError as exc:
        kind = "usage error" if exc.exit_code == 2 else "gatekeeper error (not a verdict on your code)"
        raise ToolError(f"{kind}: {exc}") from None
    except Exception as exc:  # a bug of ours: say so, keep serving
        raise ToolError(
            f"internal error in gatekeeper {__version__} ({type(exc).__name__}: {exc}); "
            "this is not a verdict on your code; please report it"
        ) from exc
    return _result(Report.model_validate_json(text))


def build_server() -> MCPServer:
    workers = _Workers()

    @asynccontextmanager
    async def lifespan(_: MCPServer) -> AsyncIterator[None]:
        # Runs once stdio is set up; the worker's imports overlap the client's first steps.
        threading.Thread(target=workers.static.warm, daemon=True).start()
        try:
            yield
        finally:
            workers.close()

    server = MCPServer(name="gatekeeper", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING",
                       lifespan=lifespan)

    async def static_check(code: Code, problem: OptProblem = None, profile: Profile = None) -> CallToolResult:
        """Static rules only, no code executed (milliseconds). Catches cached outputs, sizes baked
        into kernels, torch fallbacks, harness tampering. Returns a summary and the Report JSON."""
        return await _call(workers.static, "static_check", code=code, problem=problem, profile=profile)

    async def compile_(code: Code, problem: Problem, profile: Profile = None) -> CallToolResult:
        """Static rules, then compile the submission's extensions (trimmed compiler errors).
        Returns a summary and the Report JSON."""
        return await _call(workers.heavy, "compile_submission", code=code, problem=problem, profile=profile)

    async def run_correctness(code: Code, problem: Problem, profile: Profile = None, seed: Seed = None) -> CallToolResult:
        """Static, build, then run against the reference on the nominal and jittered shapes and
        seeds, watching for cached or aliased outputs and mutated inputs. Returns the Report JSON."""
        return await _call(workers.heavy, "run_correctness", code=code, problem=problem, profile=profile, seed=seed)

    async def submit(code: Code, problem: Problem, profile: Profile = None, seed: Seed = None) -> CallToolResult:
        """The full gate: static, build, behaviour, and timing with a score when a GPU is present.
        Returns a summary and the Report JSON with the verdict."""
        return await _call(workers.heavy, "submit", code=code, problem=problem, profile=profile, seed=seed)

    server.add_tool(static_check, name="static_check")
    server.add_tool(compile_, name="compile")
    server.add_tool(run_correctness, name="run_correctness")
    server.add_tool(submit, name="submit")
    return server


def serve_stdio() -> None:
    build_server().run("stdio")
