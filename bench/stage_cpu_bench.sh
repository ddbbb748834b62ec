#!/usr/bin/env bash
# Builds msa_cpu_bench here (Release, CPU only, generic x86-64 with run-time AVX2 dispatch) and stages it in cpubin/
# (ignored by git) with the shared libraries another Debian/Ubuntu host may lack (libfmt, libgomp, libstdc++, libgcc_s; glibc >= 2.34 is assumed) and the commit.
# Then, on that host, from the repository root with cpubin/ carried along:
#   THREADS=16 RESULTS_DIR=$OUT bash bench/run_cpu_bench.sh
# (run_cpu_bench.sh uses cpubin/msa_cpu_bench when it exists and puts cpubin/lib on LD_LIBRARY_PATH).
set -euo pipefail
cd "$(dirname "$0")/.."
B=${BUILD:-build}
cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMSA_CUDA=OFF -DCMAKE_CXX_COMPILER_LAUNCHER=ccache >/dev/null
cmake --build "$B" -j "${JOBS:-2}" --target msa_cpu_bench
rm -rf cpubin && mkdir -p cpubin/lib
cp "$B/bench/kernels/msa_cpu_bench" cpubin/
strip cpubin/msa_cpu_bench
for lib in $(ldd cpubin/msa_cpu_bench | awk '/libfmt|libgomp|libstdc|libgcc_s/ {print $3}'); do cp -L "$lib" cpubin/lib/; done
git rev-parse --short HEAD > cpubin/commit.txt
if [[ -n "$(git status --porcelain --untracked-files=no)" ]]; then echo "warning: uncommitted changes are in this build" >&2; fi
du -sh cpubin
ls -la cpubin cpubin/lib
