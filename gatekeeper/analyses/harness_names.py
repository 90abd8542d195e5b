"""Names of the harness's tools that the tampering and escape rules share: process
launchers (GK440, GK446, GK447), timers (GK410, GK413) and comparisons (GK411, GK413)."""

PROCESS = (
    "subprocess", "os.system", "os.popen", "os.exec*", "os.spawn*", "os.posix_spawn*",
    "os.startfile", "pty", "asyncio.create_subprocess_exec", "asyncio.create_subprocess_shell",
    "platform.popen", "commands", "pexpect", "sh", "plumbum",
)

TIMERS = (
    "torch.cuda.Event", "torch.cuda.streams.Event", "torch.Event", "torch.cuda.synchronize",
    "torch.cuda.Stream", "torch.cuda.streams.Stream", "torch.cuda.current_stream",
    "torch.cuda.default_stream", "torch.cuda.elapsed_time", "torch.accelerator.synchronize",
    "torch._C._cuda_synchronize", "torch.utils.benchmark", "time", "timeit",
    "triton.testing", "triton.runtime.driver",
)

COMPARISONS = (
    "torch.allclose", "torch.equal", "torch.isclose", "torch.testing", "torch.eq", "torch.ne",
    "torch.isfinite", "torch.isnan", "torch.Tensor.allclose", "torch.Tensor.equal",
    "torch.Tensor.isclose",
    "numpy.allclose", "numpy.array_equal", "numpy.isclose", "numpy.testing", "math.isclose",
)
