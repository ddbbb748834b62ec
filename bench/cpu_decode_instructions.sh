#!/usr/bin/env bash
# Instructions per decode token of a benchmark model, counted by valgrind's callgrind (deterministic: unlike times on a
# shared machine it does not move with other jobs; it does not see memory stalls, so it measures compute only).
# Collects only inside MiniMaxM3Model::forward (decode steps over random KV, one thread) and groups the functions
# into BF16 GEMV, MXFP8 GEMV, NVFP4 W4A4 (incl. the activation quantiser), attention (indexer, K/V decoding,
# softmax, P*V) and the rest. Prints the table and writes one JSON record per group.
#
#   bench/cpu_decode_instructions.sh BIN [LABEL]     (BIN: an msa_cpu_bench; LABEL names the output file)
#
# Environment: MODEL=mid (or tiny), STEPS=3, RESULTS_DIR=bench/results, MODEL_DIR=/tmp/msa_bench_models,
# COMMIT (recorded; default: the checkout's HEAD). Output: RESULTS_DIR/cpu_instructions_<date>_<LABEL>.json.
# About a minute for mid with 3 steps.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:?usage: bench/cpu_decode_instructions.sh BIN [LABEL]}
label=${2:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
command -v valgrind >/dev/null || { echo "error: needs valgrind (apt install valgrind)" >&2; exit 1; }
model=${MODEL:-mid}
steps=${STEPS:-3}
results=${RESULTS_DIR:-bench/results}
commit=${COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$results"
MSA_NUM_THREADS=1 valgrind --tool=callgrind --callgrind-out-file="$tmp/cg.out" \
    --toggle-collect='msa::MiniMaxM3Model::forward*' "$bin" --out "$tmp/bench.json" --commit "$commit" --threads 1 \
    --no-bandwidth --no-kernels --random-kv --models "$model" --decode-tokens "$steps" \
    --model-dir "${MODEL_DIR:-/tmp/msa_bench_models}" >"$tmp/log" 2>&1 || { cat "$tmp/log" >&2; exit 1; }
callgrind_annotate --threshold=100 "$tmp/cg.out" >"$tmp/annotate.txt"
/usr/bin/python3 - "$tmp/annotate.txt" "$results/cpu_instructions_$(date -u +%Y-%m-%d)_${label}.json" "$model" \
    "$steps" "$commit" <<'EOF'
import json, platform, re, sys, time
annotate, out, model, steps, commit = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
groups = {"total": 0, "bf16_gemv": 0, "mxfp8_gemv": 0, "nvfp4_w4a4": 0, "attention": 0, "other": 0}
for line in open(annotate):
    m = re.match(r"\s*([\d,]+) \(\s*[\d.]+%\)\s+(.*)", line)
    if not m:
        continue
    n, name = int(m.group(1).replace(",", "")), m.group(2)
    if "PROGRAM TOTALS" in name:
        groups["total"] += n
    elif "Mxfp8" in name or "gemm_mxfp8" in name:
        groups["mxfp8_gemv"] += n
    elif "Bf16" in name:
        groups["bf16_gemv"] += n
    elif "gemm_nvfp4_q8" in name or "quantize_rows_w4a4" in name or re.search(r"\btile<", name):
        groups["nvfp4_w4a4"] += n
    elif re.search(r"kv_row|dot_rows|pv_|softmax|block_scores|select_|e4m3_half|e4m3_table|attend|topk", name):
        groups["attention"] += n
    else:
        groups["other"] += n
date = time.strftime("%Y-%m-%d", time.gmtime())
machine = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.machine())
records = []
for g, n in groups.items():
    records.append({"figure": f"decode_instructions_{model}_{g}", "value": n / steps, "unit": "instructions/token",
                    "date": date, "machine": machine, "commit": commit, "threads": 1, "decode_steps": steps,
                    "timing": "callgrind instruction count (MiniMaxM3Model::forward only, random KV)"})
    print(f"{g:12s} {n / steps / 1e6:8.1f} M instructions per {model} decode token")
json.dump(records, open(out, "w"), indent=1)
print(f"wrote {out}", file=sys.stderr)
EOF
