"""Drives `python -m gatekeeper mcp` as a real MCP client would: a subprocess over stdio,
the mcp package's own client session, real tool calls, real reports."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

mcp = pytest.importorskip("mcp")
from mcp import ClientSession, StdioServerParameters, stdio_client  # noqa: E402

pytestmark = pytest.mark.slow  # starts the MCP server as a subprocess

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
HACKED = (FIXTURES / "submissions/seed_cached_hardcoded.py").read_text("utf-8")
HONEST = (FIXTURES / "submissions/seed_honest_generic.py").read_text("utf-8")
PROBLEM = (FIXTURES / "problems/seed_mean.py").read_text("utf-8")
SERVER = StdioServerParameters(command=sys.executable, args=["-m", "gatekeeper", "mcp"], cwd=str(ROOT))
TIMEOUT_S = 120  # a hung server fails the test instead of hanging the suite


def _session_run(steps) -> None:
    """Start the server, initialise a session, run `steps(session)`, shut down."""

    async def main() -> None:
        with anyio.fail_after(TIMEOUT_S):
            async with stdio_client(SERVER) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    await steps(session)

    anyio.run(main)


def _texts(result) -> list[str]:
    return [block.text for block in result.content if block.type == "text"]


def _report(result) -> dict:
    assert not result.is_error, _texts(result)
    texts = _texts(result)
    # The summary is the one text block; the Report travels once, as structured content.
    assert len(texts) == 1 and texts[0].startswith("Verdict:"), texts
    assert '"schema_version"' not in texts[0]
    return result.structured_content


def test_lists_the_workflow_tools_with_their_arguments():
    async def steps(session: ClientSession) -> None:
        listed = await session.list_tools()
        tools = {t.name: t for t in listed.tools}
        assert set(tools) == {"static_check", "compile", "run_correctness", "submit"}
        assert tools["static_check"].input_schema["required"] == ["code"]
        for name in ("compile", "run_correctness", "submit"):
            assert sorted(tools[name].input_schema["required"]) == ["code", "problem"]
        assert tools["static_check"].input_schema["properties"]["profile"]["anyOf"][0]["enum"] == [
            "strict", "default", "lenient"]
        assert "seed" in tools["run_correctness"].input_schema["properties"]
        for tool in tools.values():  # the structured result is described: the Report's schema
            assert tool.output_schema and "verdict" in tool.output_schema["properties"], tool.name
            assert "ctx" not in tool.input_schema["properties"]

    _session_run(steps)


def test_static_check_rejects_seed_then_passes_honest_then_survives_garbage():
    async def steps(session: ClientSession) -> None:
        hacked = await session.call_tool("static_check", {"code": HACKED, "problem": PROBLEM})
        report = _report(hacked)
        assert report["verdict"] == "reject"
        categories = {f["category"] for f in report["findings"] if f["severity"] == "error"}
        assert "hardcoded-shape" in categories  # certain: the seed's baked-in sizes
        held = [f for f in report["findings"] if (f.get("probe") or {}).get("outcome") == "unconfirmed"
                and f["category"] == "cached-output"]
        assert held and held[0]["probe"]["check"] == "GK610"  # the persistent output, held for its check
        assert report["problem"]["path"] == "<problem>"
        summary = _texts(hacked)[0]
        assert summary.startswith("Verdict: REJECT")
        line = next(f["location"]["line"] for f in report["findings"] if f["category"] == "cached-output")
        assert f"line {line}: [GK101 cached-output]" in summary and "— fix:" in summary

        honest = _report(await session.call_tool("static_check", {"code": HONEST, "problem": PROBLEM}))
        assert honest["verdict"] == "pass"
        assert [f for f in honest["findings"] if f["severity"] == "error"] == []

        # Garbage arguments: clear tool errors, never a dead server.
        empty = await session.call_tool("static_check", {"code": "   "})
        assert empty.is_error and "`code` is empty" in _texts(empty)[0]
        wrong_type = await session.call_tool("static_check", {"code": 42})
        assert wrong_type.is_error and _texts(wrong_type)[0].startswith("static_check: `code` is 42 (int)")
        assert "validation error" not in _texts(wrong_type)[0] and "pydantic" not in _texts(wrong_type)[0]
        bad_profile = await session.call_tool("static_check", {"code": HONEST, "profile": "yolo"})
        assert bad_profile.is_error and "`profile` is 'yolo'" in _texts(bad_profile)[0]
        missing = await session.call_tool("run_correctness", {"code": HONEST})
        assert missing.is_error and "`problem` is missing" in _texts(missing)[0]
        missing_problem = await session.call_tool("compile", {"code": HONEST, "problem": ""})
        assert missing_problem.is_error and "`problem` is empty" in _texts(missing_problem)[0]

        # Source that is not Python is the submission's fault: a reject with the parse error.
        not_python = _report(await session.call_tool("static_check", {"code": "def ((((\n", "problem": PROBLEM}))
        assert not_python["verdict"] == "reject"
        assert not_python["findings"][0]["rule"] == "GK003"

        # A problem that does not parse is not the submission's fault: verdict error, not reject.
        broken_problem = _report(await session.call_tool("static_check", {"code": HONEST, "problem": "class (\n"}))
        assert broken_problem["verdict"] == "error"
        assert "<problem>" in broken_problem["error"]

        again = _report(await session.call_tool("static_check", {"code": HACKED, "problem": PROBLEM}))
        assert again["verdict"] == "reject"
        assert again["submission"]["sha256"] == report["submission"]["sha256"]

    _session_run(steps)


def test_source_that_crashes_the_parser_never_takes_the_server_down():
    """Thousands of nesting levels overflow libcst's native parser, which kills its process
    by a signal. The server hands parsing to a worker process, so the call gets a reject
    (once the engine guards against it) or a tool error naming the crash, and the next call
    is served by a fresh worker."""
    nasty = {
        "unary chain": "x = " + "-" * 20000 + "1\n",
        "parentheses": "x = " + "(" * 5000 + "1" + ")" * 5000 + "\n",
        "operator chain": "x = " + "+".join(["1"] * 20000) + "\n",
    }

    async def steps(session: ClientSession) -> None:
        for what, code in nasty.items():
            result = await session.call_tool("static_check", {"code": code})
            if result.is_error:
                assert "checker crashed" in _texts(result)[0], (what, _texts(result))
            else:
                report = _report(result)
                assert report["verdict"] == "reject" and report["findings"][0]["rule"] == "GK003", what
            after = _report(await session.call_tool("static_check", {"code": HACKED, "problem": PROBLEM}))
            assert after["verdict"] == "reject", what

    _session_run(steps)


def test_a_file_name_instead_of_source_is_a_clear_error_and_never_read():
    """An agent that passes a path where the text belongs is told so; the server never reads
    the file (tool arguments are always source) and never checks the name as if it were code."""

    async def steps(session: ClientSession) -> None:
        for args in ({"code": "fixtures/submissions/seed_cached_hardcoded.py"},
                     {"code": HONEST, "problem": "fixtures/problems/seed_mean.py"}):
            result = await session.call_tool("static_check", args)
            assert result.is_error, _texts(result)
            assert "a file name: pass the file's contents" in _texts(result)[0]
        # One line of real code is still code.
        one_line = _report(await session.call_tool("static_check", {"code": "import torch"}))
        assert one_line["submission"]["path"] == "<submission>"

    _session_run(steps)


def test_each_tool_runs_up_to_its_stage_and_the_summary_names_what_did_not_run():
    """compile stops after build, run_correctness after behaviour, submit after behaviour (or
    timing on a GPU). Stages still being built show as not-implemented; a pass never hides
    that a stage did not run."""

    async def steps(session: ClientSession) -> None:
        for tool, last in (("compile", "build"), ("run_correctness", "behaviour"), ("submit", "behaviour")):
            args = {"code": HONEST, "problem": PROBLEM}
            if tool != "compile":
                args["seed"] = 7
            result = await session.call_tool(tool, args)
            report = _report(result)
            reasons = {s["name"]: (s["status"], s.get("reason") or "") for s in report["stages"]}
            order = ["static", "build", "behaviour", "timing"]
            for name in order[: order.index(last) + 1]:
                assert "not requested" not in reasons[name][1], (tool, reasons)
            for name in order[order.index(last) + 1:]:
                if name == "timing" and tool == "submit":
                    continue  # timed when a GPU is present
                assert reasons[name][0] == "skipped" and "not requested" in reasons[name][1], (tool, reasons)
            unchecked = [n for n, (status, _) in reasons.items() if status in ("skipped", "not-implemented")]
            summary = _texts(result)[0]
            for name in unchecked:
                assert name in summary.split("Not checked:")[1], f"{tool}: summary hides that {name} did not run"
        hacked = _report(await session.call_tool("submit", {"code": HACKED, "problem": PROBLEM}))
        assert hacked["verdict"] == "reject"

    _session_run(steps)


def test_progress_notifications_while_a_check_runs():
    """run_correctness builds and runs the submission (seconds to a minute): the client that
    sends a progress token hears from the server meanwhile, so it does not time out."""
    heard: list[tuple[float, str]] = []

    async def on_progress(progress: float, total, message) -> None:
        heard.append((progress, message or ""))

    async def steps(session: ClientSession) -> None:
        result = await session.call_tool("run_correctness", {"code": HONEST, "problem": PROBLEM, "seed": 7},
                                         progress_callback=on_progress)
        assert _report(result)["verdict"] in ("pass", "error")

    server = StdioServerParameters(command=sys.executable, args=["-m", "gatekeeper", "mcp"], cwd=str(ROOT),
                                   env={**os.environ, "GATEKEEPER_MCP_PROGRESS_S": "0.05"})

    async def main() -> None:
        with anyio.fail_after(TIMEOUT_S):
            async with stdio_client(server) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    await steps(session)

    anyio.run(main)
    assert heard and all("still running" in message for _, message in heard)
    assert [p for p, _ in heard] == sorted(p for p, _ in heard)


def _raw_server() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "gatekeeper", "mcp"], cwd=ROOT, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1)


def _send(process: subprocess.Popen, line: str) -> dict:
    process.stdin.write(line + "\n")
    process.stdin.flush()
    return json.loads(process.stdout.readline())


INITIALIZE = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}})


def test_malformed_json_rpc_gets_an_error_reply_and_the_server_keeps_serving():
    process = _raw_server()
    try:
        assert _send(process, "this is not json")["error"]["code"] == -32700
        reply = _send(process, json.dumps({"jsonrpc": "2.0", "id": 7, "params": {}}))
        assert reply["error"]["code"] == -32600 and reply["id"] == 7
        assert _send(process, json.dumps([1, 2]))["error"]["code"] == -32600
        assert _send(process, INITIALIZE)["result"]["serverInfo"]["name"] == "gatekeeper"
    finally:
        process.kill()
        process.wait()


def test_ctrl_c_stops_the_server():
    process = _raw_server()
    assert _send(process, INITIALIZE)["id"] == 1  # it is up and serving
    process.send_signal(signal.SIGINT)
    try:
        process.wait(timeout=30)
    finally:
        process.kill()
    err = process.stderr.read()
    assert process.returncode in (0, 130, -signal.SIGINT), err
    assert "Traceback" not in err


def _descendants(root: int) -> dict[int, int]:
    """Live descendants of `root`: pid -> start time (so a recycled pid is not a survivor)."""
    table: dict[int, tuple[int, int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if fields[0] != "Z":
                table[int(entry)] = (int(fields[1]), int(fields[19]))
    ours, grew = {root}, True
    while grew:
        grew = False
        for pid, (ppid, _) in table.items():
            if ppid in ours and pid not in ours:
                ours.add(pid)
                grew = True
    return {pid: table[pid][1] for pid in ours - {root}}


def _alive(pid: int, start: int) -> bool:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return fields[0] != "Z" and int(fields[19]) == start


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the process table from /proc")
def test_ctrl_c_during_a_run_stops_the_server_and_its_workers():
    """docs/agents.md: SIGINT while a check runs ends the server and every worker it started."""
    import time

    hang = (FIXTURES / "submissions/cpu_hang_forward.py").read_text("utf-8")
    problem = (FIXTURES / "problems/cpu_mean.py").read_text("utf-8")
    process = _raw_server()
    try:
        assert _send(process, INITIALIZE)["id"] == 1
        process.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")
        process.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "run_correctness", "arguments": {"code": hang, "problem": problem, "seed": 3}}}) + "\n")
        process.stdin.flush()
        deadline = time.monotonic() + 90
        workers: dict[int, int] = {}
        while time.monotonic() < deadline and len(workers) < 2:  # the run has started its workers
            workers = _descendants(process.pid)
            time.sleep(0.2)
        assert workers, "the run never started a worker"
        time.sleep(1.0)
        workers = _descendants(process.pid)
        process.send_signal(signal.SIGINT)
        process.wait(timeout=30)
        err = process.stderr.read()
        assert "Traceback" not in err, err
        gone_by = time.monotonic() + 15
        while time.monotonic() < gone_by and any(_alive(p, s) for p, s in workers.items()):
            time.sleep(0.2)
        left = [p for p, s in workers.items() if _alive(p, s)]
        assert not left, f"still running after the server stopped: {left}"
    finally:
        process.kill()
        process.wait()
