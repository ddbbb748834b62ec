#!/usr/bin/env bash
# Loop overhead of core/parallel at 1, 2, 4 and 16 threads (THREADS=list to change), written to
# ${RESULTS_DIR:-bench/results}/parallel_<date>.json. Builds the benchmark in ${BUILD:-build}.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${BUILD:-build}
cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$B" -j "${JOBS:-2}" --target parallel_bench
results=${RESULTS_DIR:-bench/results}
mkdir -p "$results"
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
"$B/bench/core/parallel_bench" --out "$results/parallel_$(date -u +%F).json" --commit "$commit" \
    --threads "${THREADS:-1,2,4,16}" --loops "${LOOPS:-20000}"
