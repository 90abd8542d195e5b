#!/usr/bin/env bash
# Prepare, on this machine, what bench/gpu_issue23.sh carries to the GPU machine (whose image
# has no libcst, pydantic or bubblewrap, and no ../shared). Run once per checkout, from the
# repo root; then each device call names `.whl` and `.gpu` in its carry list.
#   .whl/        wheels for Python 3.12 (../shared/tools/device-wheels.sh)
#   .gpu/bw/     this machine's bubblewrap, its libraries, and a wrapper that uses them only
#                where the image lacks them
#   .gpu/corpus/ the corpus files the parts name (their submissions and references), and a
#                labels.csv listing only those, so the corpus pick is the same there
set -euo pipefail
cd "$(dirname "$0")/.."
command -v bwrap >/dev/null || { echo "install bubblewrap here first (apt-get install bubblewrap)" >&2; exit 2; }
[ -d ../shared/corpus ] || { echo "../shared/corpus is missing" >&2; exit 2; }
bash ../shared/tools/device-wheels.sh
grep -qx '/.gpu/' .git/info/exclude 2>/dev/null || echo '/.gpu/' >> .git/info/exclude
rm -rf .gpu && mkdir -p .gpu/bw/lib .gpu/corpus
cp "$(command -v bwrap)" .gpu/bw/bwrap.bin
ldd .gpu/bw/bwrap.bin | awk '/=>/ {print $3}' | grep -v '/libc\.so' | xargs -r -I{} cp {} .gpu/bw/lib/
cat > .gpu/bw/bwrap <<'WRAP'
#!/bin/sh
here=$(dirname "$(readlink -f "$0")")
if ldd "$here/bwrap.bin" | grep -q "not found"; then
  exec /lib64/ld-linux-x86-64.so.2 --library-path "$here/lib" "$here/bwrap.bin" "$@"
fi
exec "$here/bwrap.bin" "$@"
WRAP
chmod +x .gpu/bw/bwrap
python3 - <<'PY'
import csv, shutil, sys
from pathlib import Path
sys.path.insert(0, "bench")
import gpu_attribution, gpu_corpus_pipeline
corpus, dst = Path("../shared/corpus"), Path(".gpu/corpus")
chosen = gpu_corpus_pipeline.pick(corpus, 20)
for sub, ref in chosen + list(gpu_attribution.CORPUS):
    for rel in (sub, ref):
        (dst / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(corpus / rel, dst / rel)
keep = {sub for sub, _ in chosen}
with (corpus / "technoabsurdist" / "labels.csv").open() as fh:
    rows = list(csv.DictReader(fh))
with (dst / "technoabsurdist" / "labels.csv").open("w", newline="") as fh:
    writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(r for r in rows if r["path"] in keep)
print(f".gpu/corpus: {len(chosen)} pipeline files, {len(gpu_attribution.CORPUS)} attribution files")
PY
du -sh .whl .gpu
