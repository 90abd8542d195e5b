"""Problems and submissions for the GPU validation of the timing stage (issue 5), as source
text: bench/gpu_validate.py writes them to a scratch folder and times them on the GPU."""

ELEMENTWISE_PROBLEM = '''
import torch
import torch.nn as nn

N = {n}


class Model(nn.Module):
    def forward(self, x):
        return x * 2.0 + 1.0


def get_inputs():
    return [torch.randn(N, device="cuda")]


def get_init_inputs():
    return []
'''

ELEMENTWISE_TRITON = '''
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def scale_shift_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, x * 2.0 + 1.0, mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        n = x.numel()
        scale_shift_kernel[(triton.cdiv(n, 4096),)](x, y, n, BLOCK=4096, num_warps=8)
        return y
'''

# Leaves its work on a side stream and returns: the current stream's end event sees nothing.
ELEMENTWISE_SIDE_STREAM = '''
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.side = torch.cuda.Stream()

    def forward(self, x):
        self.side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.side):
            y = x * 2.0 + 1.0
        return y
'''

MATMUL_PROBLEM = '''
import torch
import torch.nn as nn

M = {n}


class Model(nn.Module):
    def forward(self, a, b):
        return a @ b


def get_inputs():
    return [torch.randn(M, M, device="cuda", dtype=torch.bfloat16),
            torch.randn(M, M, device="cuda", dtype=torch.bfloat16)]


def get_init_inputs():
    return []
'''

MATMUL_TRITON = '''
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def mm_kernel(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
              BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP: tl.constexpr):
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BM)
    num_n = tl.cdiv(N, BN)
    per_group = GROUP * num_n
    first_m = (pid // per_group) * GROUP
    size_m = min(num_m - first_m, GROUP)
    pid_m = first_m + (pid % per_group) % size_m
    pid_n = (pid % per_group) // size_m
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a = a_ptr + rm[:, None] * sam + rk[None, :] * sak
    b = b_ptr + rk[:, None] * sbk + rn[None, :] * sbn
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        a_mask = (rm[:, None] < M) & (rk[None, :] + k * BK < K)
        b_mask = (rk[:, None] + k * BK < K) & (rn[None, :] < N)
        acc += tl.dot(tl.load(a, mask=a_mask, other=0.0), tl.load(b, mask=b_mask, other=0.0))
        a += BK * sak
        b += BK * sbk
    c = c_ptr + rm[:, None] * scm + rn[None, :] * scn
    tl.store(c, acc.to(tl.bfloat16), mask=(rm[:, None] < M) & (rn[None, :] < N))


class ModelNew(nn.Module):
    def forward(self, a, b):
        M, K = a.shape
        N = b.shape[1]
        c = torch.empty((M, N), device=a.device, dtype=a.dtype)
        grid = (triton.cdiv(M, 128) * triton.cdiv(N, 256),)
        mm_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                        c.stride(0), c.stride(1), BM=128, BN=256, BK=64, GROUP=8, num_warps=8, num_stages=3)
        return c
'''

# Correct for its first 20 calls (the behaviour stage's), then returns zeros: only the check
# of timed outputs catches it.
ELEMENTWISE_LAZY_AFTER_20 = '''
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        if self.calls > 20:
            return torch.zeros_like(x)
        return x * 2.0 + 1.0
'''

# A host synchronisation inside forward: cannot be captured into a CUDA graph.
ELEMENTWISE_HOST_SYNC = '''
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        if x.numel() and float(x.view(-1)[0].item()) != float(x.view(-1)[0].item()):
            raise RuntimeError("unreachable")
        return x * 2.0 + 1.0
'''

# Slows the reference down: patches the tensor @ operator the reference uses with a GPU spin.
MATMUL_SLOWS_REFERENCE = MATMUL_TRITON + '''

_original_matmul = torch.Tensor.__matmul__


def _slow_matmul(a, b):
    torch.cuda._sleep(200000)
    return _original_matmul(a, b)


torch.Tensor.__matmul__ = _slow_matmul
'''
