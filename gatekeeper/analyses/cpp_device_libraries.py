"""Device-wide CUB and Thrust algorithms: vendor library work, like cuBLAS. Not a rule file.

Why (red team round 12): `cub::DeviceSegmentedReduce::Sum(...)` did a row reduction while the
submission's own kernel only computed the segment offsets. A device-wide algorithm launches
NVIDIA's tuned kernels from the host, exactly as `cublasSgemm` does, so it is the vendor's work
(GK307, with the same likely/certain policy as any vendor routine). The block- and warp-level
collectives (`cub::BlockReduce`, `cub::WarpReduce`, `cub::BlockScan`, `cub::BlockRadixSort`) are
templates compiled into the submission's own kernel: its code, never flagged; so is a Thrust
algorithm run sequentially by one thread (`thrust::reduce(thrust::seq, ...)` in device code).

Spellings: `cub::DeviceReduce::Sum`, `::cub::...`, `namespace cb = cub;` (resolved by
static/cpp_names.py), `using namespace cub; DeviceReduce::Sum`, `CUB_NS_QUALIFIER::`, hipCUB;
`thrust::reduce(thrust::device, ...)`, `using namespace thrust; reduce(...)`, and an unqualified
algorithm whose first argument is a Thrust execution policy (argument-dependent lookup).
"""

from __future__ import annotations

from typing import Optional, Sequence

CUB_ROOTS = frozenset({"cub", "hipcub", "CUB_NS_QUALIFIER"})
# The op each device-wide routine computes (for the "does the library do the reference's op" test).
_CUB_OPS = {"Sum": "sum", "Max": "max", "Min": "min", "ArgMax": "argmax", "ArgMin": "argmin", "Reduce": "sum",
            "TransformReduce": "sum", "ReduceByKey": "sum", "InclusiveSum": "cumsum", "ExclusiveSum": "cumsum",
            "InclusiveScan": "cumsum", "ExclusiveScan": "cumsum", "InclusiveSumByKey": "cumsum",
            "ExclusiveSumByKey": "cumsum", "InclusiveScanByKey": "cumsum", "ExclusiveScanByKey": "cumsum",
            "SortKeys": "sort", "SortPairs": "sort", "SortKeysDescending": "sort", "SortPairsDescending": "sort",
            "StableSortKeys": "sort", "StableSortPairs": "sort", "HistogramEven": "histc", "HistogramRange": "histc",
            "CsrMV": "matmul", "Encode": "unique", "Unique": "unique", "Flagged": "nonzero", "If": "nonzero"}
THRUST_ALGOS = {"reduce": "sum", "reduce_by_key": "sum", "transform_reduce": "sum", "inner_product": "dot",
                "count": "sum", "count_if": "sum", "min_element": "argmin", "max_element": "argmax",
                "minmax_element": "max", "inclusive_scan": "cumsum", "exclusive_scan": "cumsum",
                "transform_inclusive_scan": "cumsum", "transform_exclusive_scan": "cumsum",
                "inclusive_scan_by_key": "cumsum", "exclusive_scan_by_key": "cumsum", "sort": "sort",
                "stable_sort": "sort", "sort_by_key": "sort", "stable_sort_by_key": "sort", "unique": "unique",
                "unique_by_key": "unique"}
# Execution policies that run on the calling thread (the submission's own loop).
_SEQUENTIAL = frozenset({"seq"})


def device_library_op(chain: Sequence[str]) -> Optional[str]:
    """The op a qualified call computes when it is a device-wide CUB or Thrust algorithm:
    `cub::DeviceSegmentedReduce::Sum` -> "sum", `thrust::sort` -> "sort"; else None."""
    if len(chain) >= 3 and chain[0] in CUB_ROOTS and chain[-2].startswith("Device"):
        return _CUB_OPS.get(chain[-1], chain[-1].lower())
    if len(chain) >= 2 and chain[0] == "thrust" and chain[-1] in THRUST_ALGOS:
        return THRUST_ALGOS[chain[-1]]
    return None


def thrust_policy_first(args: list[list[str]]) -> Optional[bool]:
    """Whether a call's first argument is a Thrust execution policy (`thrust::device`,
    `thrust::cuda::par.on(s)`): True for a parallel one, False for `thrust::seq`, None for none."""
    if not args or not args[0] or args[0][0] not in ("thrust", "::"):
        return None
    first = [t for t in args[0] if t != "::"]
    if first[:1] != ["thrust"]:
        return None
    return not (len(first) > 1 and first[1] in _SEQUENTIAL)
