"""GPU check of the timing stage's defences against submissions that game the timing itself:
outputs that go wrong only after the behaviour stage's calls (GK703), a call that cannot be
captured in graph mode (GK706, timed with plain launches instead), a submission that slows
the reference down in its own worker (GK704). Run from the repo root on a GPU machine
(bench/gpu_timing.sh adversarial does the setup); prints one block per case and writes
$OUT/adversarial.json."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gpu_cases as cases  # noqa: E402
import gpu_validate as v  # noqa: E402


def main() -> None:
    small = v.write("elementwise_16m.py", cases.ELEMENTWISE_PROBLEM.format(n=1 << 24))
    results = {
        "lazy_after_20": v.time_case("correct only for 20 calls", v.write("lazy.py", cases.ELEMENTWISE_LAZY_AFTER_20),
                                     small, v.config()),
        "host_sync_graph": v.time_case("host sync in forward, graph mode",
                                       v.write("host_sync.py", cases.ELEMENTWISE_HOST_SYNC), small,
                                       v.config(mode="graph")),
        "slows_reference": v.time_case("patches Tensor.__matmul__ to slow the reference",
                                       v.write("slow_ref.py", cases.MATMUL_SLOWS_REFERENCE),
                                       v.write("matmul_4096.py", cases.MATMUL_PROBLEM.format(n=4096)), v.config()),
    }
    target = Path(os.environ.get("OUT", ".")) / "adversarial.json"
    target.write_text(json.dumps(results, indent=1, default=str))


if __name__ == "__main__":
    main()
