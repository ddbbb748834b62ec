#!/usr/bin/env bash
# The CPU figures of one host in one command, for the staged binaries (bench/stage_cpu_bench.sh; with BEFORE=<commit>
# also cpubin/before/, run the same way, interleaved): per thread count, the NVFP4 W4A4 / MXFP8 / BF16 GEMVs alone
# (msa_gemv_bench: a 4096 x 4096 matrix streamed from >= 4x the LLC (192 MiB before session 10), and 512 x 4096 in cache; for the new binary also
# a 512 x 1024 W4A4 GEMV after 0 / 30 / 300 us of serial work, the price of a region whose workers went idle) and the
# model benchmark
# (run_cpu_bench.sh with RANDOM_KV=1 QUICK=1: bandwidths, GEMVs, MSA attention, tiny and mid decode).
#
#   RESULTS_DIR=$OUT bash bench/cpu_host_suite.sh
#
# Environment: THREAD_LIST="1 4 8 16", RESULTS_DIR (default bench/results), LABEL (names the host in the file
# names, e.g. h200host), SKIP_MODEL=1 (GEMVs only),
# TIMEOUT=240 (seconds per run_cpu_bench.sh run; a run over it is killed and noted, the suite goes on).
# Output: gemv_<date>_<LABEL>_<variant>_t<threads>.json and cpu_<date>_<LABEL>_<variant>_t<threads>.json, variant =
# after / before.
set -uo pipefail
cd "$(dirname "$0")/.."
results=${RESULTS_DIR:-bench/results}
mkdir -p "$results"
date=$(date -u +%Y-%m-%d)
variants=(after)
[[ -x cpubin/before/msa_cpu_bench ]] && variants+=(before)
echo "host: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for t in ${THREAD_LIST:-1 4 8 16}; do
    for v in "${variants[@]}"; do
        dir=cpubin; [[ $v == before ]] && dir=cpubin/before
        export LD_LIBRARY_PATH="$PWD/$dir/lib"
        commit="$(cat $dir/commit.txt) (staged)"
        if [[ -x $dir/msa_gemv_bench ]]; then
            out="$results/gemv_${date}${LABEL:+_$LABEL}_${v}_t${t}.json"
            rm -f "$out"
            for fmt in nvfp4_w4a4 mxfp8 bf16; do
                for shape in "--rows 4096 --cols 4096 --stream --calls 60 --reps 5" "--rows 512 --cols 4096 --calls 200 --reps 9"; do
                    # shellcheck disable=SC2086
                    "$dir/msa_gemv_bench" --format $fmt $shape --threads "$t" --commit "$commit" --label "$v" --out "$out" >&2
                done
            done
            if [[ $v == after ]]; then
                # The cost of a small parallel region (an expert-size GEMV) after the caller worked alone for a while:
                # gaps of 0, 30 and 300 us between calls (msa_gemv_bench --gap-us; not in the before binary).
                for gap in 0 30 300; do
                    "$dir/msa_gemv_bench" --format nvfp4_w4a4 --rows 512 --cols 1024 --calls 1000 --reps 5 --gap-us $gap \
                        --threads "$t" --commit "$commit" --label "$v" --out "$out" >&2
                done
            fi
        fi
        if [[ ${SKIP_MODEL:-0} != 1 ]]; then
            start=$(date +%s)
            BENCH_BIN=$dir/msa_cpu_bench THREADS=$t RANDOM_KV=1 QUICK=1 LABEL=${LABEL:+${LABEL}_}$v RESULTS_DIR=$results \
                timeout "${TIMEOUT:-240}" bash bench/run_cpu_bench.sh 2>"$results/.log" || echo "run_cpu_bench.sh $v t=$t failed or timed out (rc $?)" >&2
            grep -E "decode|bandwidth|gemv_nvfp4_w4a4_m1 |gemv_mxfp8_exact_m1 " "$results/.log" | grep -v fraction >&2 || true
            echo "  ($v, $t threads: $(( $(date +%s) - start )) s)" >&2
            rm -f "$results/.log"
        fi
    done
done
