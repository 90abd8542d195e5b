"""An agent-style loop against the gatekeeper: submit, read the findings, fix, resubmit.

The "agent" here is scripted: it knows a fix per rule code (the fix the finding's hint asks
for) and applies one per round, to the first finding it can fix, as a model reading the
report would.
It starts from the seed hack (a cached output buffer and a kernel with the nominal sizes
baked in) and stops when the gatekeeper passes the code, or gives up after --rounds.

    python examples/agent_loop.py                    # through the Python API
    python examples/agent_loop.py --via mcp          # through `gatekeeper mcp`, over stdio
    python examples/agent_loop.py --stages behaviour # on a GPU machine: run it too

Exit 0 when the last round passes, 1 when the agent gave up.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import anyio
from contextlib import asynccontextmanager
from typing import AsyncIterator, Awaitable, Callable, Optional

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SUBMISSION = ROOT / "fixtures/submissions/seed_cached_hardcoded.py"
DEFAULT_PROBLEM = ROOT / "fixtures/problems/seed_mean.py"

# --- the scripted agent's fixes: source text in, source text out ------------------------

_GENERIC_SOURCES = '''_cpp_src = "torch::Tensor mean_dim0_out(torch::Tensor x, torch::Tensor y);"
_cuda_src = r\'\'\'
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void mean_dim0_kernel(const float* __restrict__ x, float* __restrict__ y, int ranks, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float acc = 0.f;
    for (int r = 0; r < ranks; ++r) acc += x[(long)r * n + i];
    y[i] = acc / ranks;
}

torch::Tensor mean_dim0_out(torch::Tensor x, torch::Tensor y) {
    TORCH_CHECK(x.is_cuda() && x.is_contiguous() && x.scalar_type() == at::kFloat, "x must be contiguous float32 CUDA");
    int ranks = x.size(0);
    int n = x.size(1) * x.size(2);
    int threads = 256;
    int blocks = (n + threads - 1) / threads;
    mean_dim0_kernel<<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), y.data_ptr<float>(), ranks, n);
    return y;
}
\'\'\'
'''


def fix_hardcoded_shape(code: str) -> str:
    """Swap the kernel with baked-in sizes for one that takes them from the tensors."""
    sources = re.compile(r"_cpp_src = .*?\n_cuda_src = r'''.*?'''\n", re.S)
    if not sources.search(code):
        raise ValueError("cannot find _cpp_src/_cuda_src to rewrite")
    old_fn = re.search(r'_cpp_src = "torch::Tensor (\w+)\(', code).group(1)
    code = sources.sub(lambda _: _GENERIC_SOURCES, code, count=1)
    code = code.replace(old_fn, "mean_dim0_out")
    return re.sub(r"name=(['\"])\w+\1", "name='gk_agent_mean_dim0'", code, count=1)


def fix_cached_output(code: str) -> str:
    """Allocate the output on every call from the input's sizes; keep nothing across calls."""
    code = re.sub(r"\n[ \t]*self\._y = None[ \t]*(?=\n)", "", code)
    forward = re.compile(r"(    def forward\(self, x[^)]*\)[^:]*:\n)((?:        .*\n|\s*\n)+)")
    match = forward.search(code)
    ret = match and re.search(r"return (\w+)\.(\w+)\(x, (\w+)\)", match.group(2))
    if not ret:
        raise ValueError("cannot find forward's `return ext.fn(x, out)` to rewrite")
    body = ("        y = torch.empty((x.size(1), x.size(2)), device=x.device, dtype=x.dtype)\n"
            f"        return {ret.group(1)}.{ret.group(2)}(x.contiguous(), y)\n")
    return code[: match.start(2)] + body + code[match.end(2):]


def fix_literal_allocation(code: str) -> str:
    """Take the output's sizes from the input instead of the nominal literals."""
    return re.sub(r"torch\.empty\(\(\s*\d+\s*,\s*\d+\s*\)", "torch.empty((x.size(1), x.size(2))", code)


# What the scripted agent knows: a fix per rule code, and per category as a fallback
# (a new rule in a known family still gets a sensible attempt).
FIXES_BY_RULE: dict[str, Callable[[str], str]] = {
    "GK101": fix_cached_output,
    "GK201": fix_literal_allocation,
    "GK203": fix_hardcoded_shape,
    "GK204": fix_hardcoded_shape,
}
FIXES_BY_CATEGORY: dict[str, Callable[[str], str]] = {
    "cached-output": fix_cached_output,
    "hardcoded-shape": fix_hardcoded_shape,
}


def apply_one_fix(code: str, errors: list[dict]) -> tuple[str, Optional[dict]]:
    """Fix the first finding a known fix changes the code for; (code, None) if none does."""
    for finding in errors:
        fix = FIXES_BY_RULE.get(finding["rule"]) or FIXES_BY_CATEGORY.get(finding["category"])
        if fix is None:
            continue
        try:
            fixed = fix(code)
        except ValueError:  # the pattern this fix rewrites is not there (any more)
            continue
        if fixed != code:
            return fixed, finding
    return code, None


# --- two ways to reach the gatekeeper: the Python API, or the MCP server --------------------

Check = Callable[[str, str, str], Awaitable[dict]]
TOOL_FOR_STAGE = {"static": "static_check", "build": "compile", "behaviour": "run_correctness", "timing": "submit"}


def check_via_api(code: str, problem: str, stages: str) -> dict:
    import gatekeeper

    return json.loads(gatekeeper.check(code, problem, stages=stages).model_dump_json())


@asynccontextmanager
async def mcp_checker() -> AsyncIterator[Check]:
    """One `gatekeeper mcp` server for the whole loop, as an agent keeps its tools running."""
    from mcp import ClientSession, StdioServerParameters, stdio_client

    params = StdioServerParameters(command=sys.executable, args=["-m", "gatekeeper", "mcp"], cwd=str(ROOT))
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()

        async def check(code: str, problem: str, stages: str) -> dict:
            result = await session.call_tool(TOOL_FOR_STAGE[stages], {"code": code, "problem": problem})
            texts = [block.text for block in result.content if block.type == "text"]
            if result.is_error:
                raise RuntimeError(f"the gatekeeper tool failed: {texts[0] if texts else result}")
            return result.structured_content  # the Report; the text block is the summary

        yield check


@asynccontextmanager
async def api_checker() -> AsyncIterator[Check]:
    async def check(code: str, problem: str, stages: str) -> dict:
        return check_via_api(code, problem, stages)

    yield check


# --- the loop -----------------------------------------------------------------------------


def _describe(report: dict) -> str:
    errors = [f for f in report["findings"] if f["severity"] == "error"]
    listed = ", ".join(
        f"{f['rule']} {f['category']} line {f['location']['line'] if f.get('location') else '?'}" for f in errors)
    return f"{report['verdict'].upper()}" + (f": {listed}" if listed else "")


async def agent_loop(code: str, problem: str, check: Check, stages: str,
               rounds: int, out: Optional[Path] = None) -> bool:
    for n in range(1, rounds + 1):
        report = await check(code, problem, stages)
        print(f"round {n}: {_describe(report)}")
        if report["verdict"] == "pass":
            skipped = [s["name"] for s in report["stages"] if s["status"] in ("skipped", "not-implemented")]
            print(f"agent: passed after {n} round(s); not checked here: {', '.join(skipped) or 'nothing'}")
            if out:
                out.write_text(code, "utf-8")
                print(f"agent: wrote the passing submission to {out}")
            return True
        if report["verdict"] == "error":
            print(f"agent: the gatekeeper could not finish ({report.get('error')}); stopping")
            return False
        errors = [f for f in report["findings"] if f["severity"] == "error"]
        code, fixed = apply_one_fix(code, errors)
        if fixed is None:
            print("agent: no fix known for " + ", ".join(sorted({f["rule"] for f in errors}))
                  + f"; first hint was: {errors[0]['hint']}")
            return False
        print(f"agent: fixing {fixed['category']} ({fixed['rule']}) as the hint says: {fixed['hint']}")
    print(f"agent: still rejected after {rounds} rounds; giving up")
    return False


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--submission", type=Path, default=DEFAULT_SUBMISSION)
    parser.add_argument("--problem", type=Path, default=DEFAULT_PROBLEM)
    parser.add_argument("--via", choices=("api", "mcp"), default="api")
    parser.add_argument("--stages", choices=tuple(TOOL_FOR_STAGE), default="static",
                        help="last stage each round runs; static needs no GPU")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", type=Path, help="write the passing submission here")
    args = parser.parse_args(argv)
    code, problem = args.submission.read_text("utf-8"), args.problem.read_text("utf-8")
    print(f"agent: submitting {args.submission.name} for {args.problem.name} via {args.via}, stages up to {args.stages}")
    checker = api_checker() if args.via == "api" else mcp_checker()

    async def run() -> bool:
        async with checker as check:
            return await agent_loop(code, problem, check, args.stages, args.rounds, args.out)

    return 0 if anyio.run(run) else 1

if __name__ == "__main__":
    sys.exit(main())
