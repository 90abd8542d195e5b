"""Make torch/extension.h precompiled headers: `python -m gatekeeper.build.pch_compile OUT`.

Trusted code only: it reads torch's own headers and never a submission. It runs in its own
process because it imports torch, which the checker's parent does not. The options are
those torch itself writes into an extension's build file (taken from torch's ninja writer,
so they follow the installed torch), in two variants: with and without `-O2` (GCC accepts a
header precompiled at -O2 for -O2 and -O3 builds, and an unoptimised one for builds that
give no -O). Prints one JSON line: the variants made, or why none could be.
"""

from __future__ import annotations

import inspect
import json
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

VARIANTS = {"optimised.gch": ["-O2"], "plain.gch": []}


def torch_cflags() -> tuple[str, list[str]]:
    """The compiler and the C++ options torch uses for a CPU extension, less its name."""
    import torch.utils.cpp_extension as ext

    compiler = ext.get_cxx_compiler() if hasattr(ext, "get_cxx_compiler") else "c++"
    with tempfile.TemporaryDirectory() as scratch:
        ninja = Path(scratch) / "build.ninja"
        wanted = dict(path=str(ninja), name="gk_pch", sources=[str(Path(scratch) / "main.cpp")], extra_cflags=[],
                      extra_cuda_cflags=[], extra_sycl_cflags=[], extra_ldflags=[], extra_include_paths=[],
                      with_cuda=False, with_sycl=False, is_standalone=False)
        writer = ext._write_ninja_file_to_build_library  # private: its output is the ground truth
        accepted = inspect.signature(writer).parameters
        writer(**{k: v for k, v in wanted.items() if k in accepted})
        line = next(l for l in ninja.read_text().splitlines() if l.startswith("cflags = "))
    flags = [f for f in shlex.split(line[len("cflags = "):]) if not f.startswith("-DTORCH_EXTENSION_NAME=")]
    return compiler, flags


def is_gcc(compiler: str) -> bool:
    """Only GCC finds a `.gch` beside a header on its own; clang needs -include-pch."""
    try:
        out = subprocess.run([compiler, "-v"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "gcc version" in out.stderr and "clang" not in out.stderr


def make(out: Path) -> dict:
    compiler, flags = torch_cflags()
    if not is_gcc(compiler):
        return {"made": [], "why": f"the C++ compiler {compiler!r} is not GCC"}
    import torch.utils.cpp_extension as ext

    header = next((Path(p) / "torch" / "extension.h" for p in ext.include_paths()
                   if (Path(p) / "torch" / "extension.h").is_file()), None)
    if header is None:
        return {"made": [], "why": "torch/extension.h was not found in torch's include paths"}
    target = out / "torch" / "extension.h.gch"
    target.mkdir(parents=True, exist_ok=True)
    # The variants at once: each is one single-threaded compiler run of about 40 s.
    started = time.monotonic()
    runs = {name: subprocess.Popen([compiler, "-x", "c++-header", str(header), "-o", str(target / name), *flags, *extra],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            for name, extra in VARIANTS.items()}
    made, seconds, why = [], {}, []
    for name, run in runs.items():
        _, err = run.communicate(timeout=900)
        if run.returncode == 0:
            made.append(name)
            seconds[name] = round(time.monotonic() - started, 1)
        else:
            why.append(f"{name}: {err[-1500:]}")
    if why:
        return {"made": [], "why": "; ".join(why)}
    # The header itself beside its precompiled forms: GCC, having found `extension.h.gch` in
    # this folder, opens `extension.h` here for any include the PCH cannot serve (a second
    # include, other options) and fails if it is missing. Its includes are all <...>, so the
    # copy reads torch's own files.
    shutil.copyfile(header, out / "torch" / "extension.h")
    return {"made": made, "seconds": seconds, "compiler": compiler, "flags": flags}


def main() -> int:
    try:
        result = make(Path(sys.argv[1]))
    except Exception as exc:  # noqa: BLE001 - any failure only means builds go without it
        result = {"made": [], "why": f"{type(exc).__name__}: {exc}"}
    print(json.dumps(result))
    return 0 if result["made"] else 1


if __name__ == "__main__":
    sys.exit(main())
