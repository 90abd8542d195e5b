#!/usr/bin/env bash
# The build and behaviour stages on a GPU machine: the seed case and an honest CUDA kernel
# against the seed problem, each through `gatekeeper check`, twice (cold build, then cached),
# then the CPU run-fixtures (pinned to CPU by their sidecars) to show they still behave there.
#
#   bash bench/gpu_behaviour.sh            # from the repository root, venv active or in .venv
#
# Prints the device, torch version, each command, its exit code, verdict, findings and
# stage durations, in a form that can be pasted into docs/gpu-validation.md.
set -u
cd "$(dirname "$0")/.."
[ -f .venv/bin/activate ] && . .venv/bin/activate
export GATEKEEPER_CACHE_DIR="${GATEKEEPER_CACHE_DIR:-$(mktemp -d /tmp/gk-gpu-cache-XXXX)}"
echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
python - <<'PY'
import torch
print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())
if torch.cuda.is_available():
    print("device", torch.cuda.get_device_name(0))
PY

summarise() {
python - "$1" <<'PY'
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except Exception as exc:
    print("  (no JSON report:", exc, ")"); sys.exit(0)
print(f"  verdict={r['verdict']} seed={r.get('seed')} isolation={r['environment'].get('isolation')} "
      f"device={r['environment'].get('device')} gpu={r['environment'].get('gpu')}")
for s in r["stages"]:
    print(f"  stage {s['name']:<9} {s['status']:<15} {s['duration_s']:>8.3f} s  {s.get('reason') or ''}")
for f in r["findings"]:
    print(f"  {f['rule']} {f['severity']:<7} {f['stage']:<9} {f['category']:<20} {f['message'][:150]}")
if r.get("error"):
    print("  error:", r["error"][:400])
PY
}

run_case() {  # submission problem [flags]
    local sub="$1" prob="$2"; shift 2
    local out; out="$(mktemp)"
    echo
    echo "\$ gatekeeper check fixtures/submissions/$sub --problem fixtures/problems/$prob $* -f json"
    gatekeeper check "fixtures/submissions/$sub" --problem "fixtures/problems/$prob" "$@" -f json > "$out" 2>/tmp/gk-gpu-stderr
    echo "  exit code $?"
    summarise "$out"
    rm -f "$out"
}

for pass in cold cached; do
    echo
    echo "=== $pass build cache ==="
    run_case seed_cached_hardcoded.py seed_mean.py --keep-going   # expect reject: cached-output, hardcoded-shape
    run_case seed_honest_generic.py seed_mean.py                  # expect pass
done

echo
echo "=== CPU run-fixtures on this machine (pytest) ==="
python -m pytest -q tests/test_fixtures.py -k run_fixture -p no:cacheprovider 2>&1 | tail -15
