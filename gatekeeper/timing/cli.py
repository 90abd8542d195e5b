"""`gatekeeper gpu-specs`: the peak rates the floors use, and which entry a device matches."""

from __future__ import annotations

import json
import sys
from typing import Optional

import typer


def register(app: typer.Typer) -> None:
    @app.command("gpu-specs")
    def gpu_specs(
        name: Optional[str] = typer.Argument(None, help="a device name as torch reports it, e.g. 'NVIDIA H100 PCIe'"),
        fmt: str = typer.Option("text", "--format", "-f", help="text | json (one --format convention across "
                                "subcommands: gatekeeper/cli_info.py)"),
        as_json: bool = typer.Option(False, "--json", hidden=True, help="the same as --format json (before issue 21)"),
    ) -> None:
        """List the GPU spec table (vendor datasheets, dense peaks), or the entry NAME matches."""
        from gatekeeper.timing.specs import TABLE, lookup

        if name is not None:
            spec = lookup(name)
            if spec is None:
                sys.stderr.write(f"gatekeeper: no spec entry matches '{name}'; the floors then use only what "
                                 "the device reports. Add it to gatekeeper/timing/specs.py.\n")
                raise typer.Exit(2)
            specs = [spec]
        else:
            specs = [spec for _, spec in TABLE]
        if fmt not in ("text", "json"):
            sys.stderr.write(f"gatekeeper: --format {fmt!r}: choose text or json\n")
            raise typer.Exit(2)
        if as_json or fmt == "json":
            sys.stdout.write(json.dumps([s.as_dict() for s in specs], indent=2) + "\n")
            return
        print(f"{'name':<16} {'bandwidth':>11} {'fp32':>12} {'tf32':>12} {'fp16':>12} {'bf16':>12} {'L2':>8}  source")
        for s in specs:
            l2 = f"{s.l2_bytes >> 20} MiB" if s.l2_bytes else "device"
            print(f"{s.name:<16} {s.bandwidth_gbps:>6.0f} GB/s {s.fp32_tflops:>5.1f} TFLOP/s {s.tf32_tflops:>5.0f} TFLOP/s "
                  f"{s.fp16_tflops:>5.0f} TFLOP/s {s.bf16_tflops:>5.0f} TFLOP/s {l2:>8}  {s.source}")
