"""Sandbox-escape rules reject on evidence: GK444 is an error only for environment variables
known to change how work runs or is timed (or a computed name), a warning for build
settings, module loading and names no library reads; GK440 is a warning only for a literal
toolchain query (`nvcc --version`)."""

from __future__ import annotations

import pytest

from gatekeeper.report import Severity
from gatekeeper.static.testing import static_findings


_E, _W = Severity.ERROR, Severity.WARNING


@pytest.mark.parametrize("line, severity", [
    # runtime variables and computed names: errors
    ("os.environ['CUDA_LAUNCH_BLOCKING'] = '1'", _E),
    ("os.environ['PYTORCH_CUDA_ALLOC_CONF'] = 'expandable_segments:True'", _E),
    ("os.environ['CUBLAS_WORKSPACE_CONFIG'] = ':4096:8'", _E),
    ("os.environ['NVIDIA_TF32_OVERRIDE'] = '1'", _E),
    ("os.environ['TORCH_ALLOW_TF32_CUBLAS_OVERRIDE'] = '1'", _E),
    ("os.environ['LD_PRELOAD'] = '/x/libfake.so'", _E),
    ("os.environ['OMP_NUM_THREADS'] = '64'", _E),
    ("os.environ['CUDA_' + 'VISIBLE_DEVICES'] = '1'", _E),
    ("os.environ.update({'TRITON_INTERPRET': '1'})", _E),
    # build settings, module loading, names nothing reads: warnings
    ("os.environ['TORCH_CUDA_ARCH_LIST'] = '9.0'", _W),
    ("os.environ['MAX_JOBS'] = '4'", _W),
    ("os.environ['CUDA_MODULE_LOADING'] = 'LAZY'", _W),
    ("os.environ['TORCH_CUDA_VERBOSE'] = '0'", _W),
    ("os.environ.setdefault('MY_KERNEL_DEBUG', '0')", _W),
])
def test_environment_writes_are_errors_only_for_runtime_variables(line, severity):
    found = [f for f in static_findings(f"import os\n{line}\n", None) if f.rule == "GK444"]
    assert found and all(f.severity == severity for f in found), found


@pytest.mark.parametrize("line, severity", [
    ("subprocess.check_output(['nvcc', '--version'])", Severity.WARNING),
    ("subprocess.run(['nvidia-smi', '--query-gpu=name', '--format=csv'], capture_output=True)", Severity.WARNING),
    ("subprocess.run(['nvidia-smi'])", Severity.ERROR),
    ("subprocess.run(['nvidia-smi', '-lgc', '1980'])", Severity.ERROR),
    ("subprocess.run('nvcc --version', shell=True)", Severity.ERROR),
    ("subprocess.run(['nvcc', '--version'], shell=True)", Severity.ERROR),
    ("subprocess.run(['pip', '--version'])", Severity.ERROR),
    ("subprocess.run([cmd, '--version'])", Severity.ERROR),
])
def test_only_a_literal_toolchain_query_is_a_warning(line, severity):
    found = [f for f in static_findings(f"import subprocess\ncmd = input()\n{line}\n", None) if f.rule == "GK440"]
    assert found and all(f.severity == severity for f in found), found
