#!/usr/bin/env bash
# CPU benchmark of MSA Engine: memory bandwidth (triad, copy, read), GEMV/GEMM per weight format, MSA vs dense decode
# attention, tiny and mid model prefill/decode. Writes $RESULTS_DIR/cpu_<date>_t<threads>.json (every record carries
# the thread count, machine, load average and commit; bandwidths are measured with the same thread count as the
# decode they are compared to).
#
#   bench/run_cpu_bench.sh [extra msa_cpu_bench arguments]
#
# Bandwidth buffers are 4x the last-level cache (at least 256 MiB) and every decode step starts with that cache
# evicted, so decode reads memory as a model larger than the cache would; pass --warm-cache to keep the cache.
#
# Environment:
#   THREADS=N        threads for every kernel and the bandwidth tests (default: all CPUs)
#   RESULTS_DIR=DIR  where the JSON goes (default: bench/results)
#   LABEL=NAME       names the output cpu_<date>_<NAME>_t<threads>.json (e.g. before/after of an A/B run)
#   RANDOM_KV=1      decode over random KV pages instead of a real prefill (no prefill figure; much faster, the same
#                    bytes per decode token); QUICK=1 also skips the batch-256 GEMMs and dense attention at 32K
#   MODEL_DIR=DIR    cache of the random checkpoints (default: /tmp/msa_bench_models, about 0.9 GB for mid)
#   BENCH_BIN=PATH   use this msa_cpu_bench instead of building one; cpubin/msa_cpu_bench (bench/stage_cpu_bench.sh)
#                    is picked up automatically when present
#   BUILD=DIR, JOBS=N  build directory (default build-cpubench) and parallel jobs when building from source
#   OMP_WAIT_POLICY=passive|active, GOMP_SPINCOUNT=N  passed to OpenMP as usual and recorded in every record: with
#                    several threads on a busy machine the default (spinning) collapses decode, passive does not
#
# Examples: THREADS=16 RESULTS_DIR=$OUT bench/run_cpu_bench.sh          (full run, about 2-3 minutes on 16 cores)
#           THREADS=1 RANDOM_KV=1 QUICK=1 RESULTS_DIR=$OUT bench/run_cpu_bench.sh
set -euo pipefail
cd "$(dirname "$0")/.."

bin=${BENCH_BIN:-}
if [[ -z "$bin" && -x cpubin/msa_cpu_bench ]]; then bin=cpubin/msa_cpu_bench; fi
if [[ -n "$bin" ]]; then
    if [[ -d "$(dirname "$bin")/lib" ]]; then
        export LD_LIBRARY_PATH="$(cd "$(dirname "$bin")/lib" && pwd)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    fi
    if ! "$bin" --check >/dev/null 2>&1; then
        echo "error: $bin does not run here (missing shared libraries?):" >&2
        ldd "$bin" 2>&1 | grep "not found" >&2 || true
        exit 1
    fi
else
    for tool in cmake ninja g++ pkg-config; do
        command -v "$tool" >/dev/null || { echo "error: building msa_cpu_bench needs '$tool' (Debian: scripts/setup.sh installs it), or stage binaries with bench/stage_cpu_bench.sh" >&2; exit 1; }
    done
    build=${BUILD:-build-cpubench}
    if [[ ! -f "$build/CMakeCache.txt" ]]; then
        if ! cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMSA_CUDA=OFF -DMSA_BUILD_TESTS=OFF >"$build.configure.log" 2>&1; then
            echo "error: cmake configure failed (a missing dependency? see the lines below; scripts/setup.sh installs them)" >&2
            grep -iE "could not find|not found|error" "$build.configure.log" | head -20 >&2
            exit 1
        fi
    fi
    cmake --build "$build" -j "${JOBS:-$(nproc)}" --target msa_cpu_bench
    bin="$build/bench/kernels/msa_cpu_bench"
fi

threads=${THREADS:-$(nproc)}
results=${RESULTS_DIR:-bench/results}
mkdir -p "$results"
# A staged binary records the commit it was built from; the checkout it runs in may be a copy with stale git data.
if [[ -f "$(dirname "$bin")/commit.txt" ]]; then
  commit="$(cat "$(dirname "$bin")/commit.txt") (staged)"
else
  commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
  if [[ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]]; then commit="$commit+dirty"; fi
fi
out="$results/cpu_$(date -u +%Y-%m-%d)${LABEL:+_$LABEL}_t${threads}.json"
args=(--out "$out" --commit "$commit" --threads "$threads" --model-dir "${MODEL_DIR:-/tmp/msa_bench_models}")
[[ "${RANDOM_KV:-0}" == 1 ]] && args+=(--random-kv)
[[ "${QUICK:-0}" == 1 ]] && args+=(--quick)
echo "msa_cpu_bench: $bin, $threads threads, commit $commit, load $(cut -d' ' -f1-3 /proc/loadavg), OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-}" >&2
start=$(date +%s)
"$bin" "${args[@]}" "$@"
echo "wrote $out in $(( $(date +%s) - start )) s" >&2
