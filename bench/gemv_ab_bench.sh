#!/usr/bin/env bash
# Before/after comparison of two msa_gemv_bench binaries on the mid model's decode GEMV shapes, streamed from memory:
# the lm_head (BF16 32768 x 1024), the dense MLP's and the attention's MXFP8 matrices (3072 x 1024, 1024 x 1024) and
# one MoE layer's expert products (ten NVFP4 W4A4 512 x 1024 in one linear_many). Runs the two versions interleaved
# (before, after, before, ...) REPS times per thread count so that both see the same background load, appends every
# record (labelled "<LABEL> before|after rep N") to one JSON file, and prints each shape's values per version.
#
#   bench/gemv_ab_bench.sh BEFORE_BIN AFTER_BIN LABEL
#
# Environment: THREADS="1 2", REPS=5, RESULTS_DIR=bench/results, BEFORE_COMMIT / AFTER_COMMIT (recorded as "commit").
# Output: $RESULTS_DIR/gemv_<date>_<LABEL>.json.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ $# -ne 3 ]]; then
    sed -n "2,11p" "$0" >&2
    exit 2
fi
before=$1 after=$2 label=$3
out=${RESULTS_DIR:-bench/results}/gemv_$(date -u +%Y-%m-%d)_${label}.json
mkdir -p "$(dirname "$out")"
rm -f "$out"
shapes=("bf16 --rows 32768 --cols 1024" "mxfp8 --rows 3072 --cols 1024" "mxfp8 --rows 1024 --cols 1024"
        "nvfp4_w4a4 --rows 512 --cols 1024 --group 10")
for t in ${THREADS:-1 2}; do
    for r in $(seq 1 "${REPS:-5}"); do
        for version in before after; do
            bin=$before commit=${BEFORE_COMMIT:-unknown}
            [[ $version == after ]] && bin=$after commit=${AFTER_COMMIT:-$(git rev-parse --short HEAD)}
            for s in "${shapes[@]}"; do
                # shellcheck disable=SC2086
                "$bin" --format $s --threads "$t" --stream --reps 7 --out "$out" --commit "$commit" \
                    --label "$label $version rep $r" >/dev/null
            done
        done
    done
done
/usr/bin/python3 - "$out" <<'PY'
import json, sys
rows = {}
for rec in json.load(open(sys.argv[1])):
    version = rec["label"].split()[-3]
    key = (rec["threads"], rec["figure"], version)
    rows.setdefault(key, []).append(rec["value"])
for (t, fig, version), vals in sorted(rows.items()):
    vals.sort()
    print(f"t{t} {fig:40s} {version:6s} median {vals[len(vals) // 2]:6.2f}  all " + " ".join(f"{v:.2f}" for v in vals))
PY
echo "wrote $out"
