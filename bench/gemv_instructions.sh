#!/usr/bin/env bash
# Instructions per weight byte of the CPU GEMV kernels (one activation row), counted by valgrind's callgrind:
# deterministic where times on a shared machine are not (it does not see memory stalls: compute only). Runs
# msa_gemv_bench with its weights in cache, collecting only inside the GEMV call (linear_q8 for W4A4, linear for the
# others; the thread pool's dispatch included), and for W4A4 also the activation quantiser per row.
#
#   bench/gemv_instructions.sh BIN [LABEL]     (BIN: an msa_gemv_bench; LABEL names the output file)
#
# Environment: ROWS=512 COLS=4096 (the weight shape), FORMATS="nvfp4_w4a4 nvfp4_int8 mxfp8 bf16", RESULTS_DIR,
# COMMIT (recorded; default the checkout's HEAD). Output: RESULTS_DIR/gemv_instructions_<date>_<LABEL>.json.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:?usage: bench/gemv_instructions.sh BIN [LABEL]}
label=${2:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
command -v valgrind >/dev/null || { echo "error: needs valgrind (apt install valgrind)" >&2; exit 1; }
rows=${ROWS:-512}
cols=${COLS:-4096}
results=${RESULTS_DIR:-bench/results}
commit=${COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$results"
calls=10 reps=1  # the program makes calls * (reps + 1) GEMV calls (one warm-up repetition) and 200 quantiser calls
lines=()
for fmt in ${FORMATS:-nvfp4_w4a4 nvfp4_int8 mxfp8 bf16}; do
    if [[ $fmt == nvfp4_w4a4 ]]; then fns=("msa::cpu::linear_q8*" "msa::cpu::quantize_rows_w4a4*"); else fns=("msa::cpu::linear(*"); fi
    for fn in "${fns[@]}"; do
        MSA_NUM_THREADS=1 valgrind --tool=callgrind --callgrind-out-file="$tmp/cg.out" --toggle-collect="$fn" \
            "$bin" --format "$fmt" --rows "$rows" --cols "$cols" --calls $calls --reps $reps --threads 1 \
            >"$tmp/log" 2>&1 || { cat "$tmp/log" >&2; exit 1; }
        total=$(callgrind_annotate "$tmp/cg.out" | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
        bytes=$(grep -o '([0-9]* bytes per call' "$tmp/log" | grep -o '[0-9]*')
        lines+=("$fmt|$fn|$total|$bytes")
    done
done
/usr/bin/python3 - "$results/gemv_instructions_$(date -u +%Y-%m-%d)_${label}.json" "$rows" "$cols" "$commit" \
    "$((calls * (reps + 1)))" "${lines[@]}" <<'PY'
import json, platform, sys, time
out, rows, cols, commit, calls = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
machine = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.machine())
date = time.strftime("%Y-%m-%d", time.gmtime())
records = []
for line in sys.argv[6:]:
    fmt, fn, total, nbytes = line.split("|")
    total, nbytes = int(total), int(nbytes)
    base = {"date": date, "machine": machine, "commit": commit, "threads": 1, "rows": rows, "cols": cols,
            "timing": "callgrind instruction count, weights in cache"}
    if "quantize" in fn:
        rec = dict(base, figure=f"w4a4_activation_quantiser_{cols}_instructions", value=total / 200,
                   unit="instructions/row")
        print(f"{'w4a4 quantiser':14s} {total / 200:10.0f} instructions per row of {cols}")
    else:
        rec = dict(base, figure=f"gemv_{fmt}_instructions_per_byte", value=total / calls / nbytes,
                   unit="instructions/weight byte", bytes_per_call=nbytes)
        print(f"{fmt:14s} {total / calls / nbytes:10.3f} instructions per weight byte ({rows}x{cols})")
    records.append(rec)
json.dump(records, open(out, "w"), indent=1)
print("wrote", out)
PY
