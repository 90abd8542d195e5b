#!/usr/bin/env bash
# GPU validation of the timing stage (issue 5, items 1..6). Arguments pick parts:
# seed memory matmul escape repeat (gpu_validate.py), ncu (gpu_ncu.py), e2e (gpu_e2e.py),
# adversarial (gpu_adversarial.py);
# none runs items 1..6. Run from the repo root on a GPU
# machine with torch, triton and ncu; results go to $OUT (or ./gpu-out). Records are in
# docs/gpu-validation.md.
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
# The sandbox starts workers with `python -I`, which ignores PYTHONPATH: make the package and
# any carried wheels importable through a .pth file instead.
SITE=$(python3 -c 'import site; print(site.getsitepackages()[0])')
{ [ -n "${PYTHONPATH:-}" ] && echo "${PYTHONPATH//:/$'\n'}"; echo "$PWD"; } > "$SITE/gatekeeper-dev.pth"
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv;
  python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)'; } \
  2>&1 | tee "$OUT/env.txt"
if [[ " $* " == *" e2e "* ]]; then python3 bench/gpu_e2e.py 2>&1 | tee "$OUT/e2e.log"; fi
if [[ " $* " == *" adversarial "* ]]; then python3 bench/gpu_adversarial.py 2>&1 | tee "$OUT/adversarial.log"; fi
if [[ " $* " == *" fresh "* ]]; then python3 bench/gpu_timing_fresh.py ${FRESH_CASES:-} 2>&1 | tee -a "$OUT/fresh.log"; fi
if [ $# -eq 0 ] || [ -n "$(echo "$@" | tr ' ' '\n' | grep -vx 'e2e\|ncu\|adversarial\|fresh')" ]; then
  python3 bench/gpu_validate.py "$@" 2>&1 | tee "$OUT/validate.log"
fi
if [ $# -eq 0 ] || [[ " $* " == *" ncu "* ]]; then
  python3 bench/gpu_ncu.py time > "$OUT/ours.json" 2>"$OUT/ours.err"; cat "$OUT/ours.json"
  NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  timeout 300 "$NCU" --clock-control none --metrics gpu__time_duration.sum --csv -k regex:scale_shift \
    python3 bench/gpu_ncu.py profile > "$OUT/ncu.csv" 2>"$OUT/ncu.err"; echo "ncu rc $?"
  python3 bench/gpu_ncu.py compare "$OUT/ncu.csv" "$OUT/ours.json" | tee "$OUT/ncu_compare.json"
fi
