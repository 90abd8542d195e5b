from __future__ import annotations

from collections import Counter
from typing import Optional

from gatekeeper.report import Category, Confidence, Severity
from gatekeeper.analyses.elementwise_kernels import own_code_elementwise, own_code_layout_only
from gatekeeper.analyses.kernel_work import cpp_fallback
from gatekeeper.analyses.problem_ops import problem_ops
from gatekeeper.analyses.torch_op_table import torch_ops
from gatekeeper.analyses.torch_policy_table import policy
from gatekeeper.analyses.torch_rule_base import TorchFallbackRule
from gatekeeper.analyses.torch_usage_model import Use
from gatekeeper.static.examples import Invalid, Valid, snippet

_PROBLEM = '''
import torch
import torch.nn as nn
class Model(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.fc = nn.Linear(n, n)
    def forward(self, x):
        return torch.relu(self.fc(x))
def get_inputs():
    return [torch.randn(64, 256)]
def get_init_inputs():
    return [256]
'''


class FigLeafKernel(TorchFallbackRule):
    """A fig-leaf kernel: the submission's own kernels do only elementwise or layout work
    (copies, casts, scaling, an activation, a bias add, a transpose), while torch (or a
    vendor library) does every contraction and reduction the reference does (`matmul`,
    `nn.Linear`, `conv`, `bmm`, `sum`, `mean`, `softmax`, norms, pooling), unconditionally
    on the forward path, as often as the reference does.

    Why it games the benchmark: the work being timed is torch's. The own kernel is there so
    that the file has "a custom kernel", and the speedup measures torch's library plus a
    fused epilogue, not the submission's kernel.

    The own kernels are read (Triton kernels of the file, the C++/CUDA sources it compiles)
    and none contracts or reduces (no `tl.dot`, `tl.sum`, shared memory, shuffles, atomics,
    accumulating loops), while the reference's every heavy op is on torch's side. Needs the
    problem. Confidence:
    - certain, in every profile, when the own kernels only move data (copies, casts,
      transposes: every store is a loaded value): they compute nothing of the reference;
    - certain under `strict`, and `likely` under `default` / `lenient` (a warning until the
      run-time work attribution GK667 confirms that torch did the timed work) when they do
      elementwise arithmetic (a fused bias + activation epilogue next to cuDNN's conv or
      cuBLAS's GEMM). KernelBench judges that pattern correct, and on ../shared/corpus it is
      16% of the KernelBench-correct own-kernel submissions (28 of 177) and 69 of 400
      hzeng2000 files: whether it is a hack is a policy question, not a static fact.

    Not flagged: an own kernel that does a contraction or reduction (even with torch's
    epilogue around it); torch calls on a fallback branch (GK310) or in C++ on one arm of a
    run-time choice; references with no contraction or reduction (GK301-GK304 judge those);
    own launches whose source the file does not hold (a prebuilt module): nothing to read.
    """

    code = "GK309"
    name = "FigLeafKernel"
    category = Category.TORCH_FALLBACK
    severity = Severity.ERROR
    strict_severity = None
    confirmed_by = "GK667"
    situations = ()
    summary = "own kernels only do elementwise work while torch does every contraction/reduction of the reference"
    message = ("torch computes `{op}` here{more}, every contraction and reduction the reference does ({families}), "
               "while the submission's own kernels ({kernels}) {work}: the timed contraction or reduction is torch's, "
               "and the own kernel is a fig leaf.")
    hint = (
        "Write the contraction or reduction itself in your own kernel (a Triton `tl.dot` / `tl.sum`, a CUDA "
        "kernel), and keep torch for allocation and views. Fusing only the epilogue around torch's op does not "
        "make the op yours."
    )
    needs_problem = True
    EXAMPLE_PROBLEM = _PROBLEM
    VALID = [
        Valid(snippet("""
            import torch
            import triton
            import triton.language as tl
            @triton.jit
            def mm_relu(a, b, c, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
                acc = tl.zeros((BM, BN), dtype=tl.float32)
                for k in range(0, K, BK):
                    acc += tl.dot(tl.load(a), tl.load(b))
                tl.store(c, tl.maximum(acc, 0))
            class ModelNew(torch.nn.Module):
                def forward(self, x):
                    y = torch.empty(x.shape[0], self.w.shape[0], device=x.device)
                    mm_relu[(1,)](x, self.w, y, 1, 1, 1, BM=16, BN=16, BK=16)
                    return y + self.bias
        """)),
    ]
    INVALID = [
        Invalid(snippet("""
            import torch
            import triton
            import triton.language as tl
            @triton.jit
            def relu_k(x, y, n, BLOCK: tl.constexpr):
                offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
                tl.store(y + offs, tl.maximum(tl.load(x + offs, mask=offs < n), 0), mask=offs < n)
            class ModelNew(torch.nn.Module):
                def __init__(self, n):
                    super().__init__()
                    self.fc = torch.nn.Linear(n, n)
                def forward(self, x):
                    h = self.fc(x)
                    y = torch.empty_like(h)
                    relu_k[(h.numel() // 1024 + 1,)](h, y, h.numel(), BLOCK=1024)
                    return y
        """), line=13, message="torch computes `linear` here, every contraction and reduction the reference does (matmul)"),
    ]

    def finish(self) -> None:
        problem = self.ctx.problem
        if problem is None:
            return
        ops = torch_ops()
        table = policy()
        heavy = Counter({f: n for f, n in problem_ops(problem).reference.items() if ops.is_heavy(f)})
        if not heavy:
            return
        self.usage.resolve()
        usage = self.usage
        if usage.own_kernel is None:
            return  # no own kernel at all: GK301-GK305 report that as certain already
        uses = [u for u in usage.uses if u.fallback is None and not cpp_fallback(u) and not self.allowed(u)]
        done = Counter(table.family(u.op) for u in uses)
        if any(done[family] < count for family, count in heavy.items()):
            return
        sources = list(self.ctx.cpp_sources)
        elementwise, _ = own_code_elementwise(self.ctx, sources)
        if elementwise is not True:
            return
        layout = own_code_layout_only(self.ctx, sources)
        # an epilogue next to torch's op: a policy question (KernelBench accepts it); strict rejects
        confidence = Confidence.CERTAIN if layout or self.ctx.profile == "strict" else Confidence.LIKELY
        first = _first(uses, heavy, table)
        if first is None:
            return
        others = sum(1 for u in uses if table.family(u.op) in heavy) - 1
        message = self.message.format(
            op=first.op, more=f" (and {others} more such op{'s' if others > 1 else ''})" if others > 0 else "",
            families=", ".join(sorted(heavy)), kernels=", ".join(f"`{k.what}`" for k in usage.kernels[:3]),
            work="only move data (copies, casts, transposes)" if layout else "only do elementwise work")
        evidence = {"op": first.op, "reference_ops": sorted(heavy), "kernels": [k.what for k in usage.kernels],
                    "own_work": "layout" if layout else "elementwise"}
        if first.cpp is not None:
            self.report_cpp(first.cpp[0], first.cpp[1], message, evidence=evidence, confidence=confidence)
        elif first.node is not None:
            self.report(first.node, message, evidence=evidence, confidence=confidence)


def _first(uses: list[Use], heavy: Counter, table) -> Optional[Use]:  # type: ignore[no-untyped-def]
    for use in uses:
        if table.family(use.op) in heavy and (use.node is not None or use.cpp is not None):
            return use
    return None
