"""The MCP server over stdio: `gatekeeper mcp`.

Each tool returns the summary for the agent as its text and the Report as structured
content, described by the tools' outputSchema; long calls send progress notifications. A
malformed JSON-RPC line gets an error reply (gatekeeper.agent.stdio). A usage error comes
back as a tool error result with the message; an internal error likewise, saying it is
not a verdict. Neither stops the server: submissions are parsed and run only in worker
processes (gatekeeper.agent.worker), never in the server itself.
"""

from __future__ import annotations

import os
import signal
import threading
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Any, AsyncIterator, Literal, Optional

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent
from pydantic import Field, ValidationError

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


# The static worker's backstop is the configured `[limits] static_timeout_s` plus this margin:
# the static stage's own limit then always fires first, with a finding that names the rule
# that was running, instead of the backstop's bare "did not finish" (issue 12).
STATIC_MARGIN_S = 15.0
HEAVY_TIMEOUT_S = 3600.0  # the stages keep their own, shorter, timeouts; this is a backstop


class _Workers:
    """Static checks in one worker process, compile/run/submit in another (one at a time:
    they share the compiler, the CPU and the GPU), so a static check never waits for them."""

    def __init__(self) -> None:
        self.static = Worker("static", static_backstop_s())
        self.heavy = Worker("stages", HEAVY_TIMEOUT_S)

    def close(self) -> None:
        self.static.close()
        self.heavy.close()


def static_backstop_s(search_from: Optional[Path] = None) -> float:
    """The static worker's time limit: the static stage's configured limit plus a margin. The
    configuration is found as the tools' `check` finds it for source text (from the working
    directory); an invalid one is the tool call's usage error, and the default limit holds here."""
    from gatekeeper.config import Config, load_config

    try:
        limit = load_config(search_from=search_from or Path.cwd()).limits.static_timeout_s
    except GatekeeperError:
        limit = Config().limits.static_timeout_s
    return limit + STATIC_MARGIN_S


# The structured result is the Report; its JSON Schema is the tools' outputSchema.
Result = Annotated[CallToolResult, Report]
# A cold build takes about a minute and some clients give up after 60 s of silence.
PROGRESS_EVERY_S = float(os.environ.get("GATEKEEPER_MCP_PROGRESS_S", "5"))


def _result(report: Report) -> CallToolResult:
    # The summary is what the agent reads; the Report travels once, as structured content.
    return CallToolResult(content=[TextContent(type="text", text=summarise(report))],
                          structured_content=report.model_dump(mode="json"))


async def _progress(ctx: Optional[Context], what: str, done: anyio.Event) -> None:
    """Progress notifications while a check runs (only when the client asked for them with
    a progress token): the elapsed time and what is running, every few seconds."""
    if ctx is None:
        return
    started = anyio.current_time()
    step = 0
    with anyio.move_on_after(HEAVY_TIMEOUT_S):
        while not done.is_set():
            with anyio.move_on_after(PROGRESS_EVERY_S):
                await done.wait()
            if done.is_set():
                break
            step += 1
            elapsed = anyio.current_time() - started
            try:
                await ctx.report_progress(step, None, f"{what}: still running after {elapsed:.0f} s")
            except Exception:  # a client that went away; the call itself decides what happens
                return


async def _call(worker: Worker, function: str, ctx: Optional[Context] = None, what: str = "",
                **kwargs: Any) -> CallToolResult:
    done = anyio.Event()
    outcome: list = []

    async def work() -> None:
        try:
            outcome.append(await anyio.to_thread.run_sync(lambda: worker.call(function, **kwargs)))
        except Exception as exc:  # raised below, outside the task group (no ExceptionGroup)
            outcome.append(exc)
        finally:
            done.set()

    async with anyio.create_task_group() as group:
        group.start_soon(_progress, ctx, what or function, done)
        await work()
    try:
        if isinstance(outcome[0], Exception):
            raise outcome[0]
        text = outcome[0]
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

    server = _Server(name="gatekeeper", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING",
                       lifespan=lifespan)

    async def static_check(code: Code, problem: OptProblem = None, profile: Profile = None) -> Result:
        """Static rules only, no code executed (milliseconds). Catches cached outputs, sizes baked
        into kernels, torch fallbacks, harness tampering. Returns a summary and the Report JSON."""
        workers.static.timeout_s = static_backstop_s()  # follows edits of the configuration
        return await _call(workers.static, "static_check", code=code, problem=problem, profile=profile)

    async def compile_(code: Code, problem: Problem, profile: Profile = None, ctx: Optional[Context] = None) -> Result:
        """Static rules, then compile the submission's extensions (trimmed compiler errors).
        Returns a summary and the Report JSON."""
        return await _call(workers.heavy, "compile_submission", ctx, "compiling", code=code, problem=problem,
                           profile=profile)

    async def run_correctness(code: Code, problem: Problem, profile: Profile = None, seed: Seed = None,
                              ctx: Optional[Context] = None) -> Result:
        """Static, build, then run against the reference on the nominal and jittered shapes and
        seeds, watching for cached or aliased outputs and mutated inputs. Returns the Report JSON."""
        return await _call(workers.heavy, "run_correctness", ctx, "building and running", code=code,
                           problem=problem, profile=profile, seed=seed)

    async def submit(code: Code, problem: Problem, profile: Profile = None, seed: Seed = None,
                     ctx: Optional[Context] = None) -> Result:
        """The full gate: static, build, behaviour, and timing with a score when a GPU is present.
        Returns a summary and the Report JSON with the verdict."""
        return await _call(workers.heavy, "submit", ctx, "building, running and timing", code=code,
                           problem=problem, profile=profile, seed=seed)

    server.gk_workers = workers
    server.add_tool(static_check, name="static_check")
    server.add_tool(compile_, name="compile")
    server.add_tool(run_correctness, name="run_correctness")
    server.add_tool(submit, name="submit")
    return server


class _Server(MCPServer):
    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if isinstance(exc.__cause__, ValidationError):
                raise ToolError(plain_argument_errors(name, exc.__cause__)) from None
            raise


def plain_argument_errors(tool: str, exc: ValidationError) -> str:
    """Argument errors in plain words: which argument, what was wrong, what to send."""
    parts = []
    for err in exc.errors():
        name = ".".join(str(p) for p in err["loc"]) or "arguments"
        given = err.get("input")
        if err["type"] == "missing":
            parts.append(f"`{name}` is missing")
        elif err["type"] in ("string_type", "int_type", "int_parsing", "literal_error", "enum"):
            kind = type(given).__name__
            parts.append(f"`{name}` is {given!r} ({kind}): {err['msg'][0].lower() + err['msg'][1:]}")
        elif err["type"] == "extra_forbidden":
            parts.append(f"`{name}` is not an argument of {tool}")
        else:
            parts.append(f"`{name}`: {err['msg']}")
    wanted = {"static_check": "code (the submission's source) and optionally problem, profile",
              "compile": "code and problem (both as source text) and optionally profile"}.get(
        tool, "code and problem (both as source text) and optionally profile, seed")
    return f"{tool}: {'; '.join(parts)}. Send {wanted}."


def serve_stdio() -> None:
    server = build_server()

    def interrupted(signum: int, frame: Any) -> None:
        # asyncio would cancel the loop and then wait for the thread blocked reading stdin,
        # which never returns while the client keeps the pipe open: end here instead,
        # with the worker processes.
        server.gk_workers.static.kill_now()
        server.gk_workers.heavy.kill_now()
        os.write(2, b"gatekeeper mcp: interrupted\n")
        os._exit(130)

    signal.signal(signal.SIGINT, interrupted)

    async def main() -> None:
        from gatekeeper.agent.stdio import checked_stdio

        low = server._lowlevel_server  # the SDK's own run loop, over our checked transport
        async with checked_stdio() as (read_stream, write_stream):
            await low.run(read_stream, write_stream, low.create_initialization_options())

    anyio.run(main)
