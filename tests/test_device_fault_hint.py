"""A worker that dies of a memory fault on a CUDA problem is told why that often happens: a
CPU loop in a C++ extension reading device pointers (what made honest CPU GEMM fixtures die
on a GPU host, where their problems had no sidecar and so ran on cuda)."""

from gatekeeper.report import StageName
from gatekeeper.runtime.failures import worker_failure
from gatekeeper.sandbox.job_result import JobResult


def _died(returncode: int) -> JobResult:
    return JobResult(status="crashed", returncode=returncode, detail="the worker running the submission died")


def test_a_memory_fault_on_a_cuda_problem_names_host_reads_of_device_memory():
    for code in (-11, 139, -7):
        (found,) = worker_failure(_died(code), StageName.BEHAVIOUR, {}, None, "cuda")
        assert found.rule == "GK662"
        assert "data_ptr" in found.message and 'device = "cpu"' in found.message, found.message


def test_the_hint_is_not_given_on_the_cpu_or_for_other_deaths():
    for code, device in ((-11, "cpu"), (1, "cuda"), (-9, "cuda"), (139, None)):
        (found,) = worker_failure(_died(code), StageName.BEHAVIOUR, {}, None, device)
        assert found.rule == "GK662" and "data_ptr" not in found.message, (code, device, found.message)
