"""MCP `static_check` round trip over stdio: client call to parsed result, server warm.
Bar: p50 under 100 ms.

Starts `python -m gatekeeper mcp` with the mcp package's stdio client, as an agent host
does, times start-up to an initialised session, then calls static_check with each labelled
fixture and a sample of generated submissions (bench/corpus.py), code and problem as
source strings, and parses the Report JSON from the reply (part of the round trip).

    python bench/bench_mcp_latency.py [--repeat 20] [--corpus 10]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_api_latency import cases, percentile  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
BAR_MS = 100.0


async def measure(repeat: int, corpus: int) -> float:
    params = StdioServerParameters(command=sys.executable, args=["-m", "gatekeeper", "mcp"], cwd=str(ROOT))
    started = time.perf_counter()
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        print(f"server start-up to initialised session: {(time.perf_counter() - started) * 1000:.0f} ms")
        all_samples: list[float] = []
        medians = []
        for name, code, problem in cases(corpus):  # the seed pair and generated submissions
            arguments = {"code": code, "problem": problem} if problem else {"code": code}
            for _ in range(3):  # warm: imports, rule discovery, first-call paths
                await session.call_tool("static_check", arguments)
            samples = []
            for _ in range(repeat):
                t0 = time.perf_counter()
                result = await session.call_tool("static_check", arguments)
                report = result.structured_content
                samples.append((time.perf_counter() - t0) * 1000)
            assert not result.is_error, result
            medians.append(statistics.median(samples))
            all_samples.extend(samples)
            print(f"{name:40s} {report['verdict']:7s} p50 {medians[-1]:6.2f} ms  p90 {percentile(samples, 0.9):6.2f} ms")
    overall = statistics.median(medians)
    print(f"{len(medians)} submissions x {repeat} calls; all calls: p50 {statistics.median(all_samples):.2f} ms, "
          f"p90 {percentile(all_samples, 0.9):.2f} ms, max {max(all_samples):.2f} ms")
    return overall


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--corpus", type=int, default=10)
    args = parser.parse_args()
    print(f"Python {platform.python_version()}, {platform.machine()}, {os.cpu_count()} CPUs visible")
    overall = anyio.run(measure, args.repeat, args.corpus)
    ok = overall < BAR_MS
    if hasattr(os, "getloadavg"):
        print(f"load average during the run: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(f"MCP static_check round trip over stdio: p50 {overall:.2f} ms per submission "
          f"(bar < {BAR_MS:.0f} ms): {'MET' if ok else 'NOT MET'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
