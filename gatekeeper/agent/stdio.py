"""The MCP stdio transport, with JSON-RPC error replies for malformed input.

The SDK's transport drops a line it cannot read without a word, so a client that sent a
broken frame waits for a reply that never comes. Here such a line gets the JSON-RPC error
the specification names (-32700 parse error: not JSON; -32600 invalid request: JSON, but
not a JSON-RPC message), with the request's id when it has one, and serving goes on.
"""

from __future__ import annotations

import json
import os
from contextlib import asynccontextmanager
from io import TextIOWrapper
from typing import Any, AsyncIterator, Optional

import anyio
import mcp_types as types
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage


def malformed_reply(line: str) -> Optional[types.JSONRPCError]:
    """The error reply for a line that is not a JSON-RPC message; None for a good one."""
    try:
        data: Any = json.loads(line)
    except ValueError as exc:
        return types.JSONRPCError(jsonrpc="2.0", id=None, error=types.ErrorData(
            code=types.PARSE_ERROR, message=f"Parse error: the line is not JSON ({exc.msg} at column {exc.colno})"))
    try:
        types.jsonrpc_message_adapter.validate_python(data, by_name=False)
        return None
    except Exception:
        pass
    ident = data.get("id") if isinstance(data, dict) else None
    if not isinstance(ident, (str, int)) or isinstance(ident, bool):
        ident = None
    what = "a JSON array (batches are not part of MCP)" if isinstance(data, list) else (
        "an object without a string `method`" if isinstance(data, dict) and not isinstance(data.get("method"), str)
        else "not a JSON-RPC 2.0 request, notification or response")
    return types.JSONRPCError(jsonrpc="2.0", id=ident, error=types.ErrorData(
        code=types.INVALID_REQUEST, message=f"Invalid Request: the message is {what}; send "
        '{"jsonrpc": "2.0", "id": ..., "method": ..., "params": {...}}'))


class _CheckedLines:
    """Stdin lines for the SDK's reader; malformed ones are answered here, not passed on."""

    def __init__(self, raw: Any) -> None:
        self.raw = raw
        self.write_stream: Any = None
        self.ready = anyio.Event()

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[str]:
        async for line in self.raw:
            if not line.strip():
                continue
            reply = malformed_reply(line)
            if reply is None:
                yield line
                continue
            await self.ready.wait()
            await self.write_stream.send(SessionMessage(reply))


@asynccontextmanager
async def checked_stdio() -> AsyncIterator[tuple[Any, Any]]:
    # The wire keeps private copies of fds 0 and 1; fd 0 then reads the null device, so that
    # nothing else in the process can take a frame from the client (as the SDK does for stdout).
    wire_in = os.dup(0)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    raw = anyio.wrap_file(TextIOWrapper(os.fdopen(wire_in, "rb"), encoding="utf-8", errors="replace"))
    lines = _CheckedLines(raw)
    async with stdio_server(stdin=lines) as (read_stream, write_stream):  # type: ignore[arg-type]
        lines.write_stream = write_stream
        lines.ready.set()
        yield read_stream, write_stream
