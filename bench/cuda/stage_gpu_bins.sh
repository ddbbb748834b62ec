#!/bin/bash
# Builds the CUDA targets on this machine (nvcc 13.0, no GPU needed; repository CMake, -j2) and stages them for the
# GPU machine in gpubin/ (ignored by git through the shared info/exclude), with the shared libraries that machine
# lacks (libfmt, libgomp). Then, on the GPU: run with carry ["gpubin"]: `OUT=$OUT bash bench/cuda/run_gpu.sh`.
set -e
B=${BUILD:-build-cuda}
cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMSA_CUDA=ON -DCMAKE_CXX_COMPILER_LAUNCHER=ccache \
  -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache > /dev/null
cmake --build "$B" -j2 --target msa_cuda_decode_test msa_cuda_prefill_test msa_cuda_decode_bench msa_cuda_prefill_bench
rm -rf gpubin && mkdir -p gpubin/lib
cp "$B/tests/cuda/msa_cuda_decode_test" gpubin/msa_decode_test
cp "$B/tests/cuda/msa_cuda_prefill_test" gpubin/msa_prefill_test
cp "$B/bench/cuda/msa_cuda_decode_bench" gpubin/msa_decode_bench
cp "$B/bench/cuda/msa_cuda_prefill_bench" gpubin/msa_prefill_bench
for lib in $(ldd gpubin/msa_prefill_test | awk '/libfmt|libgomp|libspdlog/ {print $3}'); do cp -L "$lib" gpubin/lib/; done
git rev-parse HEAD > gpubin/commit.txt
EXCL="$(git rev-parse --git-common-dir)/info/exclude"
grep -qx '/gpubin/' "$EXCL" 2>/dev/null || echo '/gpubin/' >> "$EXCL"
ls -la gpubin gpubin/lib
