#!/usr/bin/env bash
# Mid-model decode against the thread pool's worker spin time (MSA_SPIN_US), per thread count, interleaved, with
# the pool's profile per token (loops, worker sleeps, time inside loops per call site; msa_cpu_bench's "pool" field).
# Uses the staged binary (bench/stage_cpu_bench.sh) or BENCH_BIN; no kernel benchmarks, random KV.
#
#   RESULTS_DIR=$OUT bash bench/cpu_spin_sweep.sh
#
# Environment: THREAD_LIST="4 8 16", SPIN_LIST="30 100 300 1000", REPS=2, LABEL (names the host), MODELS=mid,
# ISA_LIST="avx512 avx2" (runs each case with the AVX-512 kernels and with MSA_NO_AVX512=1, interleaved; default:
# what the CPU has), EVICT_LIST="read write" (each case with the cache evicted by reading, the default, and by
# writing, msa_cpu_bench --evict-by-writing, interleaved),
# EXTRA_ARGS (more msa_cpu_bench arguments, e.g. --warm-cache),
# RESULTS_DIR (default bench/results). Output: cpu_<date>_<LABEL>_spin<us>_t<threads>_rep<r>.json, and a table of
# tokens/s and fraction of bandwidth on stdout (bench/cpu_spin_table.py).
set -uo pipefail
cd "$(dirname "$0")/.."
results=${RESULTS_DIR:-bench/results}
mkdir -p "$results"
bin=${BENCH_BIN:-cpubin/msa_cpu_bench}
commit="$(cat "$(dirname "$bin")/commit.txt" 2>/dev/null || git rev-parse --short HEAD) (staged)"
date=$(date -u +%Y-%m-%d)
echo "host: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
# With cpubin/before/ staged (BEFORE=<commit> bench/stage_cpu_bench.sh) both binaries run, interleaved.
variants=(after)
[[ -z ${BENCH_BIN:-} && -x cpubin/before/msa_cpu_bench ]] && variants+=(before)
files=()
for r in $(seq 1 "${REPS:-2}"); do
    for t in ${THREAD_LIST:-4 8 16}; do
        for s in ${SPIN_LIST:-30 100 300 1000}; do
          for isa in ${ISA_LIST:-default}; do
           for evict in ${EVICT_LIST:-read}; do
            for v in "${variants[@]}"; do
                b=$bin; c=$commit; tag=""
                if [[ $v == before ]]; then
                    b=cpubin/before/msa_cpu_bench; c="$(cat cpubin/before/commit.txt) (staged)"; tag=_before
                elif [[ ${#variants[@]} -gt 1 ]]; then
                    tag=_after
                fi
                no_avx512=0
                if [[ $isa != default ]]; then tag+=_$isa; [[ $isa == avx2 ]] && no_avx512=1; fi
                evict_arg=""
                if [[ -n ${EVICT_LIST:-} ]]; then tag+=_evict$evict; [[ $evict == write ]] && evict_arg=--evict-by-writing; fi
                out="$results/cpu_${date}${LABEL:+_$LABEL}${tag}_spin${s}_t${t}_rep${r}.json"
                LD_LIBRARY_PATH="$(cd "$(dirname "$b")/lib" 2>/dev/null && pwd)" MSA_SPIN_US=$s MSA_NO_AVX512=$no_avx512 timeout 240 "$b" \
                    --no-kernels --random-kv --models "${MODELS:-mid}" --threads "$t" --commit "$c" --out "$out" $evict_arg ${EXTRA_ARGS:-} \
                    2>>"$results/.spin_sweep.log" || echo "$v spin $s t=$t rep $r failed or timed out (rc $?)" >&2
                [[ -f $out ]] && files+=("$out")
            done
           done
          done
        done
    done
done
python3 "$(dirname "$0")/cpu_spin_table.py" "${files[@]}"
