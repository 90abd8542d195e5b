"""The HTML leaderboard at 100,000 submissions: store build time, page generation time,
number of pages and the largest page. Usage: python bench/bench_leaderboard_pages.py [ROWS]"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from test_leaderboard_large import make_store  # noqa: E402


def main() -> None:
    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    with tempfile.TemporaryDirectory(prefix="gk-lb-bench-") as tmp:
        started = time.perf_counter()
        db = make_store(Path(tmp) / "r.db", rows)
        built = time.perf_counter() - started
        started = time.perf_counter()
        run = subprocess.run([sys.executable, "-m", "gatekeeper", "leaderboard", "--store", str(db), "--html",
                              str(Path(tmp) / "html")], capture_output=True, text=True)
        rendered = time.perf_counter() - started
        assert run.returncode == 0, run.stderr
        pages = list((Path(tmp) / "html").glob("*.html"))
        sizes = sorted(p.stat().st_size for p in pages)
        print(f"{rows} rows: store built in {built:.1f} s; {len(pages)} pages written in {rendered:.1f} s; "
              f"index.html {(Path(tmp) / 'html' / 'index.html').stat().st_size / 1e3:.0f} kB, largest page "
              f"{sizes[-1] / 1e3:.0f} kB, total {sum(sizes) / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
