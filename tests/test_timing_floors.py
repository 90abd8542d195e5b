"""Counting bytes and FLOPs on the reference (CPU tensors), the floor arithmetic, the specs."""

from types import SimpleNamespace

import pytest
import torch

from gatekeeper.timing.floors import Counts, count, floors, memory_time_us, sidecar_flops, unique_bytes
from gatekeeper.timing.specs import lookup, peak_tflops, reported_bandwidth_gbps, resolve


class Mean0(torch.nn.Module):
    def forward(self, x):
        return x.mean(dim=0)


class MatMul(torch.nn.Module):
    def forward(self, a, b):
        return a @ b


@pytest.mark.slow
def test_seed_problem_bytes_and_the_h100_memory_floor_from_the_seed_readme():
    counts = count(Mean0(), [torch.randn(4, 16, 48)])
    assert counts.bytes_moved == 4 * 16 * 48 * 4 + 16 * 48 * 4 == 15360
    assert counts.flops == 0 and counts.flops_source == "none"
    h100 = lookup("NVIDIA H100 80GB HBM3")
    f = floors(counts, h100, launch_floor_us=2.0)
    assert f.memory_floor_us * 1000 == pytest.approx(4.585, rel=1e-3)  # 15,360 B / 3.35 TB/s = 4.6 ns
    assert f.bound == "launch" and f.floor_us == 2.0


@pytest.mark.slow
def test_matmul_flops_from_the_flop_counter_and_the_compute_floor():
    a = torch.randn(64, 32)
    b = torch.randn(32, 16)
    counts = count(MatMul(), [a, b])
    assert counts.flops == 2 * 64 * 32 * 16
    assert counts.bytes_moved == (64 * 32 + 32 * 16 + 64 * 16) * 4
    big = Counts(bytes_moved=3 * 4096 * 4096 * 2, flops=2 * 4096**3, flops_source="flop_counter", dtype="bfloat16")
    f = floors(big, lookup("NVIDIA H200"), launch_floor_us=2.0)
    assert f.bound == "compute"
    assert f.compute_floor_us == pytest.approx(2 * 4096**3 / 990e12 * 1e6)
    assert f.floor_us == f.compute_floor_us


def test_parameters_count_as_bytes_read_and_linear_flops_are_counted():
    model = torch.nn.Linear(32, 8)
    counts = count(model, [torch.randn(4, 32)])
    assert counts.flops == 2 * 4 * 32 * 8
    assert counts.bytes_moved == (4 * 32 + 8 * 32 + 8 + 4 * 8) * 4


def test_sidecar_flops_is_the_fallback(tmp_path):
    problem = tmp_path / "p.py"
    problem.write_text("")
    (tmp_path / "p.toml").write_text("flops = 123456\n[jitter]\nenabled = true\n")
    counts = count(Mean0(), [torch.randn(4, 8)], problem)
    assert (counts.flops, counts.flops_source) == (123456, "sidecar")
    (tmp_path / "p.toml").write_text("flops = 'lots'\n")
    assert sidecar_flops(problem) is None
    (tmp_path / "p.toml").write_text("not toml [")
    assert sidecar_flops(problem) is None


def test_views_and_repeated_arguments_are_read_once():
    x = torch.randn(100)
    assert unique_bytes([x, x, x[10:20]]) == 400


def test_floor_arithmetic_units():
    assert memory_time_us(4_800_000_000, 4800) == pytest.approx(1000.0)  # 4.8 GB at 4.8 TB/s: 1 ms
    assert memory_time_us(10, 0) == 0.0


@pytest.mark.parametrize("name,expected", [
    ("NVIDIA H100 80GB HBM3", "H100 SXM"), ("NVIDIA H100 PCIe", "H100 PCIe"), ("NVIDIA H100 NVL", "H100 NVL"),
    ("NVIDIA H200", "H200 SXM"), ("NVIDIA GH200 480GB", "GH200"), ("NVIDIA A100-SXM4-40GB", "A100 40GB SXM"),
    ("NVIDIA A100-SXM4-80GB", "A100 80GB SXM"), ("NVIDIA A100 80GB PCIe", "A100 80GB PCIe"),
    ("NVIDIA A100-PCIE-40GB", "A100 40GB PCIe"), ("NVIDIA B200", "B200"), ("NVIDIA L40S", "L40S"),
    ("NVIDIA L4", "L4"), ("NVIDIA A10G", "A10G"), ("NVIDIA A10", "A10"),
    ("NVIDIA GeForce RTX 4090", "RTX 4090"), ("Tesla V100-SXM2-16GB", "V100 SXM2"), ("Tesla T4", "T4"),
])
def test_device_names_match_their_spec(name, expected):
    assert lookup(name).name == expected


def test_unknown_device_has_no_spec():
    assert lookup("Some Future Accelerator") is None
    assert resolve("Some Future Accelerator", SimpleNamespace())[0] is None


def test_device_properties_win_over_the_table():
    props = SimpleNamespace(L2_cache_size=60 * 2**20, multi_processor_count=132,
                            memory_clock_rate=3_201_000, memory_bus_width=6144)
    spec, origin = resolve("NVIDIA H200", props)
    assert spec.l2_bytes == 60 * 2**20 and origin["l2_bytes"] == "device"
    assert spec.bandwidth_gbps == pytest.approx(reported_bandwidth_gbps(props)) and origin["bandwidth_gbps"] == "device"
    assert spec.bf16_tflops == 990 and origin["bf16_tflops"] == "vendor datasheet"
    odd = SimpleNamespace(memory_clock_rate=1, memory_bus_width=8)  # a unit quirk, not a memory system
    spec, origin = resolve("NVIDIA H200", odd)
    assert spec.bandwidth_gbps == 4800 and origin["bandwidth_gbps"] == "vendor datasheet"


def test_peak_rate_by_dtype_keeps_the_floor_low():
    h100 = lookup("NVIDIA H100 80GB HBM3")
    assert peak_tflops(h100, "bfloat16") == 990
    assert peak_tflops(h100, "float32") == 495  # tf32: the lower floor
    assert peak_tflops(h100, "float32", "fp32") == 67
    assert peak_tflops(h100, "int8") >= 990


def test_the_problem_sidecar_accepts_the_flops_key(tmp_path):
    from gatekeeper.problem.sidecar import load_sidecar

    problem = tmp_path / "p.py"
    problem.write_text("")
    (tmp_path / "p.toml").write_text("flops = 2e9\n[tolerances.float32]\natol = 1e-4\nrtol = 1e-4\n")
    assert load_sidecar(problem).flops == 2e9
    assert sidecar_flops(problem) == 2_000_000_000
