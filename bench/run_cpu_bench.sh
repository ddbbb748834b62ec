#!/usr/bin/env bash
# CPU benchmark of MSA Engine: builds msa_cpu_bench (Release, CPU only) and writes bench/results/cpu_<date>.json
# (memory bandwidth, GEMV/GEMM per weight format, MSA vs dense decode attention, tiny and mid model prefill/decode).
#   bench/run_cpu_bench.sh [extra msa_cpu_bench arguments, e.g. --models tiny]
# Random checkpoints are generated once under ${MSA_BENCH_MODELS:-/tmp/msa_bench_models} (about 0.9 GB for mid).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build}
test -f "$build/CMakeCache.txt" || cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMSA_CUDA=OFF
cmake --build "$build" -j "${JOBS:-2}" --target msa_cpu_bench
mkdir -p bench/results
out="bench/results/cpu_$(date -u +%Y-%m-%d).json"
"$build/bench/kernels/msa_cpu_bench" --out "$out" --commit "$(git rev-parse --short HEAD)" \
    --model-dir "${MSA_BENCH_MODELS:-/tmp/msa_bench_models}" "$@"
echo "wrote $out"
