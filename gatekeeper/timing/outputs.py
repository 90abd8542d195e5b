"""Compare the sampled outputs of timed calls with the reference's, in the trusted parent."""

from __future__ import annotations

from typing import Any

# (rtol, atol) by dtype: loose enough for tf32 and for a different summation order.
TOLERANCE = {"float64": (1e-5, 1e-8), "float32": (1e-3, 1e-3), "float16": (2e-2, 2e-2),
             "bfloat16": (3e-2, 3e-2)}


def tolerances(problem: Any) -> dict[str, tuple[float, float]]:
    """(rtol, atol) by dtype: the problem's (sidecar, problem.yaml, its format's default)
    where it is looser than this table."""
    table = dict(TOLERANCE)
    if problem is None or not hasattr(problem, "tolerance"):
        return table
    for dtype in table:
        atol, rtol = problem.tolerance(dtype)
        if atol or rtol:
            table[dtype] = (max(rtol, table[dtype][0]), max(atol, table[dtype][1]))
    return table


def compare(submission: list[dict[str, Any]], reference: dict[int, list[dict[str, Any]]],
            table: dict[str, tuple[float, float]] = TOLERANCE) -> dict[str, Any]:
    """`submission`: output messages {index, set, tensors}; `reference`: set -> tensors.
    Every kept call must match its input set's reference output, sample for sample."""
    from gatekeeper.sandbox.tensors import unpack

    checked, mismatches = 0, []
    for msg in submission:
        ref = reference.get(int(msg["set"]))
        index = msg.get("index")
        if ref is None:
            mismatches.append({"index": index, "why": "no reference output for this input set"})
            continue
        checked += 1
        got = msg.get("tensors") or []
        if len(got) != len(ref):
            mismatches.append({"index": index, "why": f"{len(got)} output tensors, reference has {len(ref)}"})
            continue
        for i, (g, r) in enumerate(zip(got, ref)):
            if g["shape"] != r["shape"]:
                mismatches.append({"index": index, "tensor": i, "why": f"shape {g['shape']} != {r['shape']}"})
                continue
            a, b = unpack(g["values"]).double(), unpack(r["values"]).double()
            rtol, atol = table.get(r["dtype"], (1e-3, 1e-3))
            if a.shape != b.shape:
                mismatches.append({"index": index, "tensor": i, "why": "sample sizes differ"})
                continue
            bad = ~((a - b).abs() <= atol + rtol * b.abs())
            bad |= a.isnan() & ~b.isnan()
            if bool(bad.any()):
                worst = float((a - b).abs().nan_to_num(float("inf")).max())
                mismatches.append({"index": index, "tensor": i, "why": f"{int(bad.sum())} of {a.numel()} "
                                   f"sampled elements off (max abs error {worst:.3g}, rtol {rtol}, atol {atol})"})
    detail = "; ".join(f"timed call {m['index']}: {m['why']}" for m in mismatches[:3])
    return {"checked": checked, "mismatches": mismatches, "detail": detail}


def compare_checks(checks: list[tuple[dict[str, Any], dict[str, Any]]],
                   table: dict[str, tuple[float, float]] = TOLERANCE) -> dict[str, Any]:
    """`checks`: (submission, reference) sample reports of the same timed call index, each
    {index, tensors} (gatekeeper.timing.blocks); the call indices were drawn by the parent
    after each block ran."""
    subs, refs = [], {}
    for sub, ref in checks:
        index = int(sub.get("index", ref.get("index", -1)))
        if sub.get("tensors") is None:
            subs.append({"index": index, "set": index, "tensors": []})
        else:
            subs.append({"index": index, "set": index, "tensors": sub["tensors"]})
        if ref.get("tensors") is not None:
            refs[index] = ref["tensors"]
    return compare(subs, refs, table)
