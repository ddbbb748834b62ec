#!/usr/bin/env bash
# Mid-model decode against the thread pool's worker spin time (MSA_SPIN_US), per thread count, interleaved, with
# the pool's profile per token (loops, worker sleeps, time inside loops per call site; msa_cpu_bench's "pool" field).
# Uses the staged binary (bench/stage_cpu_bench.sh) or BENCH_BIN; no kernel benchmarks, random KV.
#
#   RESULTS_DIR=$OUT bash bench/cpu_spin_sweep.sh
#
# Environment: THREAD_LIST="4 8 16", SPIN_LIST="30 100 300 1000", REPS=2, LABEL (names the host), MODELS=mid,
# RESULTS_DIR (default bench/results). Output: cpu_<date>_<LABEL>_spin<us>_t<threads>_rep<r>.json, and a table of
# tokens/s and fraction of bandwidth on stdout (bench/cpu_spin_table.py).
set -uo pipefail
cd "$(dirname "$0")/.."
results=${RESULTS_DIR:-bench/results}
mkdir -p "$results"
bin=${BENCH_BIN:-cpubin/msa_cpu_bench}
[[ -d "$(dirname "$bin")/lib" ]] && export LD_LIBRARY_PATH="$(cd "$(dirname "$bin")/lib" && pwd)"
commit="$(cat "$(dirname "$bin")/commit.txt" 2>/dev/null || git rev-parse --short HEAD) (staged)"
date=$(date -u +%Y-%m-%d)
echo "host: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
files=()
for r in $(seq 1 "${REPS:-2}"); do
    for t in ${THREAD_LIST:-4 8 16}; do
        for s in ${SPIN_LIST:-30 100 300 1000}; do
            out="$results/cpu_${date}${LABEL:+_$LABEL}_spin${s}_t${t}_rep${r}.json"
            MSA_SPIN_US=$s timeout 240 "$bin" --no-kernels --random-kv --models "${MODELS:-mid}" --threads "$t" \
                --commit "$commit" --out "$out" 2>>"$results/.spin_sweep.log" \
                || echo "spin $s t=$t rep $r failed or timed out (rc $?)" >&2
            [[ -f $out ]] && files+=("$out")
        done
    done
done
python3 "$(dirname "$0")/cpu_spin_table.py" "${files[@]}"
