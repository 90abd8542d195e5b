"""Who did the work, judged in the parent from the recorder's per-call summaries
(gatekeeper.behaviour.attribution): the report's `work` section and the GK667 findings.

Classes: `own` (the submission's compiled functions, custom operators, its kernels),
`torch` (ATen compute operators and torch's own kernels, inductor's Triton kernels), `vendor`
(cuBLAS, cuDNN, CUTLASS kernels on a GPU), `glue` (allocation, views, copies: not counted).
"""

from __future__ import annotations

import re
from typing import Any, Optional

from gatekeeper.runtime.checks import finding
from gatekeeper.report import Finding, Location, Severity, StageName

STAGE = StageName.BEHAVIOUR
CODE = "GK667"

_VENDOR = re.compile(r"cublas|cutlass|cudnn|xmma|nvjet|gemv2?[NT]?_kernel|gemmSN|gemmk1|splitKreduce|cufft|_lds\d+|largek|"
                     r"implicit_convolve|^(ampere|hopper|volta|turing|sm\d+)_", re.I)
_TORCH = re.compile(r"\bat::|at_cuda_detail|\bc10::|^void (at|native|c10)\b|^triton_(poi|per|red|tem|for)_|"
                    r"CatArrayBatched|cunn_|\bcub::|\bflash::|pytorch_flash", re.I)
_GLUE_KERNEL = re.compile(r"^Memcpy|^Memset|FillFunctor|direct_copy_kernel|copy_kernel_impl", re.I)
_GLOBAL = re.compile(r"__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?(?:static\s+)?(?:void\s+)?"
                     r"(?:__launch_bounds__\s*\([^)]*\)\s*)?(\w+)\s*\(")
_TRITON = re.compile(r"@(?:triton\.)?(?:jit|autotune)[^\n]*\n(?:\s*@[^\n]*\n)*\s*def\s+(\w+)")


_FAMILIES = {"matmul": ("mm", "addmm", "bmm", "baddbmm", "matmul", "linear", "addmv", "mv", "dot", "_addmm_activation",
                        "addbmm", "einsum", "tensordot"),
             "conv": ("convolution", "_convolution", "conv", "cudnn_convolution", "mkldnn_convolution",
                      "_slow_conv2d", "slow_conv", "thnn_conv", "_nnpack")}


def op_family(name: str) -> str:
    """aten::addmm and aten::mm are the same work for 'does torch compute what the reference computes'."""
    short = name.split("::", 1)[-1].split(".", 1)[0].rstrip("_")
    for family, members in _FAMILIES.items():
        if short in members or any(short.startswith(m) for m in members if family == "conv"):
            return family
    return short


def own_kernel_names(source: str) -> set[str]:
    """Kernels the submission defines: CUDA __global__ functions and Triton jit functions. A
    submission that instantiates CUTLASS templates in its own source owns those kernels too."""
    names = set(_GLOBAL.findall(source)) | set(_TRITON.findall(source))
    if "cutlass" in source.lower():
        names.add("cutlass")
    return {n for n in names if len(n) > 2}


# Namespaces of torch's and the libraries' kernels: a kernel qualified by one is never the
# submission's by name, whatever it is called (a fig-leaf `reduce_kernel` does not make
# torch's `at::native::reduce_kernel<...>` its own).
_LIBRARY_NAMESPACES = frozenset({"at", "c10", "cub", "thrust", "flash", "cudnn", "cublas", "cublasLt", "nvjet",
                                 "pytorch_flash", "torch", "aten", "cufft", "cusparse"})
# cuBLAS's own CUTLASS kernels take a generated operator name as their template argument
# (`cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_...>`); a submission's CUTLASS instantiation
# takes CUTLASS's types (`cutlass::gemm::kernel::GemmUniversal<...>`).
_VENDOR_CUTLASS_ARG = re.compile(r"[<,]\s*(?:cutlass3?x?_(?:sm)?\d+|sm\d+_xmma)\w*\s*[,>]")


def _qualified_head(name: str) -> str:
    """`void at::native::reduce_kernel<512, 1>(Op)` -> `at::native::reduce_kernel`: the
    function's qualified name without its return type, template arguments or parameters."""
    text = name.replace("(anonymous namespace)", "anonymous")
    head, depth = [], 0
    for ch in text:
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth = max(0, depth - 1)
        elif ch == "(" and depth == 0:
            break
        elif depth == 0:
            head.append(ch)
    words = "".join(head).split()
    return words[-1] if words else ""


def _own_by_name(name: str, own: frozenset[str] | set[str]) -> bool:
    head = _qualified_head(name)
    parts = head.split("::")
    if "cutlass" in own and parts[0] in ("cutlass", "cute"):
        return not _VENDOR_CUTLASS_ARG.search(name)
    if any(part in _LIBRARY_NAMESPACES for part in parts[:-1]):
        return False
    return parts[-1] in own or any(re.search(rf"(?<![A-Za-z0-9_]){re.escape(n)}(?![A-Za-z0-9_])", head)
                                   for n in own if n != "cutlass")


def kernel_class(name: str, own: frozenset[str] | set[str] = frozenset()) -> str:
    if _own_by_name(name, own):
        return "own"
    if _GLUE_KERNEL.search(name):
        return "glue"
    if _VENDOR.search(name) or _VENDOR_CUTLASS_ARG.search(name):
        return "vendor"
    if _TORCH.search(name):
        return "torch"
    return "own"  # not a library's name: an extension kernel whose source we did not parse


# A library's device-wide algorithm compiled into the submission's own module from its headers
# (`cub::DeviceSegmentedReduce::Sum`, `thrust::sort`, ATen's reduce templates) is launched from
# the submission's object, but the code that runs is the library's: its kernel keeps the
# library's namespace (red team round 12's CUB call was cleared on the H100 as own work, at
# 70% of the time). CUTLASS and CuTe are not here: instantiating them is writing the kernel.
_TEMPLATE_LIBRARIES = {"cub": "vendor", "thrust": "vendor", "flash": "vendor", "pytorch_flash": "vendor",
                       "at": "torch", "c10": "torch", "torch": "torch", "aten": "torch"}
_MANGLED_PART = re.compile(r"(\d+)")


def _top_namespace(name: str) -> str:
    """The outermost namespace of a kernel's name, mangled (`_ZN3cub17CUB_...`) or not
    (`void cub::...::DeviceReduceKernel<...>(...)`); "" for an unqualified name."""
    if name.startswith("_ZN"):
        at = 3 + (name[3:4] == "K")
        while True:
            length = _MANGLED_PART.match(name, at)
            if length is None:
                return ""
            part = name[length.end():length.end() + int(length[1])]
            if part != "_GLOBAL__N_1":  # an anonymous namespace: the next one names it
                return part
            at = length.end() + int(length[1])
    head = _qualified_head(name)
    return head.split("::", 1)[0] if "::" in head else ""


def _kernel_class(kernel: dict[str, Any], own: frozenset[str] | set[str]) -> str:
    """By the launcher when CUPTI's tracker saw the launch (gatekeeper/runtime/kernel_owner.py),
    else by the name. A torch-launched copy or fill is glue either way; an own launch of a
    library template's kernel is that library's."""
    owner = kernel.get("owner")
    if owner is None:
        return kernel_class(kernel["name"], own)
    if owner == "own":
        return _TEMPLATE_LIBRARIES.get(_top_namespace(kernel["name"]), "own")
    return "glue" if owner == "torch" and _GLUE_KERNEL.search(kernel["name"]) else owner


def _short(name: str) -> str:
    return name if len(name) <= 120 else name[:117] + "..."


def summarise(calls: list[dict[str, Any]], own_kernels: frozenset[str] | set[str] = frozenset()) -> dict[str, Any]:
    """Sum every checked call: per class, count and share of time; top names."""
    classes: dict[str, dict[str, float]] = {c: {"count": 0, "time_s": 0.0} for c in ("own", "torch", "vendor", "glue")}
    names: dict[tuple[str, str], list[float]] = {}
    gpu = any(c.get("kernels") for c in calls)
    wall = 0.0
    for call in calls:
        wall += float(call.get("wall_s", 0.0))
        for own in call.get("own_calls", []):
            # On a GPU an own call only launches; its kernels carry the device time.
            _add(classes, names, "own", own["name"], own["count"], 0.0 if gpu else float(own["self_s"]))
        for op in call.get("ops", []):
            name = op["name"]
            cls = "own" if name.startswith("own-op:") else "glue" if op["glue"] else "torch"
            _add(classes, names, cls, name, op["count"], 0.0 if gpu else float(op["s"]))
        for kernel in call.get("kernels", []):
            _add(classes, names, _kernel_class(kernel, own_kernels), kernel["name"], kernel.get("count", 1),
                 float(kernel["s"]))
    compute = sum(v["time_s"] for k, v in classes.items() if k != "glue")
    total = compute + classes["glue"]["time_s"]
    own_of_compute = classes["own"]["time_s"] / compute if compute > 0 else (1.0 if classes["own"]["count"] else 0.0)
    for value in classes.values():
        value["share"] = round(value["time_s"] / total, 4) if total > 0 else 0.0
        value["time_s"] = round(value["time_s"], 6)
    top = {c: [{"name": _short(n), "count": int(v[0]), "time_s": round(v[1], 6)}
               for (k, n), v in sorted(names.items(), key=lambda kv: -kv[1][1]) if k == c][:5]
           for c in classes}
    ownership = next((c["ownership"] for c in calls if c.get("ownership")), None)
    return {"device": "cuda" if gpu else "cpu", "calls": len(calls), "wall_s": round(wall, 6),
            "time_basis": "device time of kernels (CUPTI)" if gpu else "host time of operators and own functions",
            **({"kernel_ownership": ownership} if ownership else {}),
            "classes": classes, "own_share_of_compute": round(own_of_compute, 4), "top": top}


def _add(classes: dict, names: dict, cls: str, name: str, count: float, seconds: float) -> None:
    classes[cls]["count"] += int(count)
    classes[cls]["time_s"] += seconds
    entry = names.setdefault((cls, name), [0, 0.0])
    entry[0] += count
    entry[1] += seconds


def is_heavy_op(name: str) -> bool:
    """A contraction or reduction (matmul, conv, sum, softmax, norm...), by the op table the
    static rules use: the work a fig-leaf hands to torch."""
    from gatekeeper.analyses.torch_op_table import torch_ops

    short = name.split("::", 1)[-1].split(".", 1)[0]
    return op_family(name) in _FAMILIES or torch_ops().is_heavy(short)


def _torch_epilogue(call: dict[str, Any], reference_ops: list[str], own_kernels: frozenset[str] | set[str]) -> bool:
    """torch wrote the returned tensor, but torch and the vendor libraries did none of the
    reference's contractions and reductions in this call: the own code did them, and torch
    only applied an elementwise or layout step (an own GEMM, then `torch.relu`). Where the
    reference has no such op, torch's elementwise op is the whole work, never an epilogue."""
    wanted = {op_family(r) for r in reference_ops if is_heavy_op(r)}
    if not wanted:
        return False
    if any(_kernel_class(k, own_kernels) == "vendor" for k in call.get("kernels", [])):
        return False  # a cuBLAS/cuDNN kernel: which of the reference's ops it ran is unknown
    torch_heavy = {op_family(o["name"]) for o in call.get("ops", [])
                   if not o["glue"] and not o["name"].startswith("own-op:") and is_heavy_op(o["name"])}
    return not torch_heavy


def forbidden_op(call: dict[str, Any], forbidden: tuple[str, ...] | list[str]) -> Optional[tuple[str, str]]:
    """(recorded op, forbidden entry) when torch ran an op the problem forbids, by name or by
    family: a forbidden `torch.nn.functional.linear` is the matmul family whether the call
    reached aten::addmm through F.linear, an fx graph or TorchScript."""
    from fnmatch import fnmatchcase

    from gatekeeper.analyses.torch_policy_table import policy

    table = policy()
    entries = [(f, f.replace("::", ".").rsplit(".", 1)[-1]) for f in forbidden if f]
    for op in call.get("ops", []):
        name = op["name"]
        if op["glue"] or name.startswith("own-op:"):
            continue
        short = name.split("::", 1)[-1].split(".", 1)[0].rstrip("_")
        for entry, last in entries:
            if fnmatchcase(short, last) or (not any(c in last for c in "*?[") and
                                            table.family(short) == table.family(last)):
                return name, entry
    return None


def judge_call(call: dict[str, Any], settings: dict[str, Any],
               own_kernels: frozenset[str] | set[str] = frozenset(),
               reference_ops: Optional[list[str]] = None) -> Optional[tuple[str, dict[str, Any]]]:
    """None when the submission's own code did the work; else (why, evidence)."""
    work = summarise([call], own_kernels)
    own, torch_, vendor = (work["classes"][c] for c in ("own", "torch", "vendor"))
    theirs = torch_["count"] + vendor["count"]
    own_share = work["own_share_of_compute"]
    evidence = {"shares": {c: v["share"] for c, v in work["classes"].items()}, "own_share_of_compute": own_share,
                "top_torch": work["top"]["torch"][:3] + work["top"]["vendor"][:3],
                "producer": call.get("producer")}
    if call.get("tampered"):
        return "the submission interfered with the recorder: " + "; ".join(call["tampered"]), evidence
    if theirs == 0:
        return None
    if own["count"] == 0:
        return "no function or kernel of the submission's own ran; torch computed the output", evidence
    producer = (call.get("producer") or {}).get("by")
    min_share = float(settings.get("min_own_share", 0.005))
    output_share = float(settings.get("torch_output_max_own_share", 0.8))
    if producer in ("torch", "torch-inside-own") and own_share < output_share \
            and not _torch_epilogue(call, reference_ops or [], own_kernels):
        where = ("inside the submission's own code (an at:: call of an extension or a custom operator's body)"
                 if producer == "torch-inside-own" else "outside the own code")
        return (f"torch computed the returned tensor {where} with {call['producer'].get('op')}; the submission's "
                f"own code took {own_share:.1%} of the compute time"), evidence
    if own_share < min_share:
        return f"the submission's own code took only {own_share:.2%} of the compute time", evidence
    return None


def judge(calls: dict[str, dict[str, Any]], reference_ops: list[str], profile: str, settings: dict[str, Any],
          location: Optional[Location], source: str = "",
          forbidden: tuple[str, ...] = ()) -> tuple[dict[str, Any], list[Finding]]:
    """The report's `work` section and the findings for every checked call."""
    own_kernels = own_kernel_names(source)
    work = summarise(list(calls.values()), own_kernels)
    found: list[Finding] = []
    failing = {}
    for trial, call in calls.items():
        verdict = judge_call(call, settings, own_kernels, reference_ops)
        if verdict is not None:
            failing[trial] = verdict
    if not failing and forbidden:
        # On every checked call, as the work itself would be: a self-test that runs the
        # forbidden op once against the own kernel is not it.
        hits = {trial: forbidden_op(call, forbidden) for trial, call in calls.items()}
        if all(hits.values()):
            failing = {trial: (f"torch computed {hit[0]} in every checked call, and the problem forbids `{hit[1]}` "
                               "(its `forbidden` list): that op must be the submission's own, however it is reached",
                               {"forbidden": hit[1], "op": hit[0]})
                       for trial, hit in hits.items() if hit is not None}
    if not failing and len(calls) >= 2 and any(is_heavy_op(r) for r in reference_ops):
        # Every checked call returned exactly the values one of torch's contractions or
        # reductions computed in it (result_prints.py): the own code only handed them back,
        # in torch's storage or copied. A self-test that runs torch on one call is not this.
        # A call with nothing to compare (a constant or all-NaN result from the schedule's special
        # values, no heavy op) is no evidence either way; one whose values differ clears it.
        sources = {trial: call.get("result_from_torch") for trial, call in calls.items()
                   if call.get("result_from_torch") is not None}
        if len(sources) >= 2 and all(sources.values()):
            failing = {trial: (f"the returned tensor holds exactly the values torch's {op} computed in the call; the "
                               "submission's own code only handed them back (in torch's storage or copied): a "
                               "fig-leaf kernel", {"result_from_torch": op})
                       for trial, op in sources.items()}
    if failing:
        trial, (why, evidence) = next(iter(failing.items()))
        found.append(finding(CODE, STAGE, dict(evidence, trials=list(failing), work=work["classes"]), location,
                             detail=why, trial=trial))
        work["torch_did_the_work"] = True
        return work, found
    work["torch_did_the_work"] = False
    shares = work["classes"]
    if shares["torch"]["count"] + shares["vendor"]["count"]:
        used = sorted({o["name"] for c in calls.values() for o in c.get("ops", [])
                       if not o["glue"] and not o["name"].startswith("own-op:")})
        reference_families = {op_family(r) for r in reference_ops}
        overlap = sorted(u for u in used if op_family(u) in reference_families)
        strict = profile == "strict" and bool(overlap or shares["vendor"]["count"])
        own_share = work["own_share_of_compute"]
        detail = (f"torch or vendor libraries did part of the work (own code {own_share:.0%} of the compute time; "
                  f"{shares['torch']['count']} torch and {shares['vendor']['count']} vendor operators/kernels)"
                  + (f"; it computes {', '.join(overlap[:5])}, which the reference computes" if overlap else ""))
        f = finding(CODE, STAGE, {"shares": {c: v["share"] for c, v in shares.items()}, "own_share_of_compute":
                                  own_share, "torch_ops": used[:20],
                                  "reference_ops": overlap}, location, detail=detail, trial="every call")
        f.severity = Severity.ERROR if strict else Severity.WARNING
        found.append(f)
    return work, found


def work_lines(work: dict[str, Any]) -> list[str]:
    """The report's `work` section in two or three short lines (text renderer)."""
    lines = []
    classes = work.get("classes") or {}
    if classes:
        parts = ", ".join(f"{c} {v.get('share', 0):.0%} ({v.get('count', 0)})" for c, v in classes.items()
                          if v.get("count"))
        lines.append(f"work ({work.get('device', '?')}, {work.get('calls', 0)} calls, share of "
                     f"{'device' if work.get('device') == 'cuda' else 'host'} time): {parts or 'nothing recorded'}")
        top = [t["name"] for c in ("own", "torch", "vendor") for t in (work.get("top") or {}).get(c, [])[:2]]
        if top:
            lines.append("top: " + "; ".join(top))
    ratios = work.get("error_ratio")
    if ratios:
        lines.append("error ratio to an honest computation in the reference dtype: " + ", ".join(f"{t} {r:g}x" for t, r in ratios.items()))
    return lines
