#!/usr/bin/env bash
# Builds msa_cpu_bench and msa_gemv_bench here (Release, CPU only, generic x86-64 with run-time AVX2 dispatch) and
# stages them in cpubin/ (ignored by git) with the shared libraries another Debian/Ubuntu host may lack (libfmt,
# libgomp, libstdc++, libgcc_s; glibc >= 2.34 is assumed) and the commit.
# Then, on that host, from the repository root with cpubin/ carried along:
#   THREADS=16 RESULTS_DIR=$OUT bash bench/run_cpu_bench.sh      (one run), or
#   RESULTS_DIR=$OUT bash bench/cpu_host_suite.sh                 (1/4/8/16 threads, GEMVs and decode, A/B)
# (run_cpu_bench.sh uses cpubin/msa_cpu_bench when it exists and puts cpubin/lib on LD_LIBRARY_PATH).
#
# BEFORE=<commit>: also builds that commit (its files extracted by git archive into build-before-src/, built there) and
# stages its binaries in cpubin/before/ for an A/B comparison on the same host (cpu_host_suite.sh runs both).
set -euo pipefail
cd "$(dirname "$0")/.."
B=${BUILD:-build}
stage() {  # stage SRC_BUILD_DIR DEST COMMIT
    local build=$1 dest=$2 commit=$3
    rm -rf "$dest" && mkdir -p "$dest/lib"
    for bin in msa_cpu_bench msa_gemv_bench; do
        if [[ -x "$build/bench/kernels/$bin" ]]; then cp "$build/bench/kernels/$bin" "$dest/" && strip "$dest/$bin"; fi
    done
    for lib in $(ldd "$dest/msa_cpu_bench" | awk '/libfmt|libgomp|libstdc|libgcc_s/ {print $3}'); do cp -L "$lib" "$dest/lib/"; done
    echo "$commit" > "$dest/commit.txt"
}
targets() {  # the bench targets a build directory knows (an older commit may lack msa_gemv_bench)
    cmake --build "$1" --target help | awk -F: '/^msa_(cpu|gemv)_bench:/ {print $1}'
}
cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMSA_CUDA=OFF -DCMAKE_CXX_COMPILER_LAUNCHER=ccache >/dev/null
cmake --build "$B" -j "${JOBS:-2}" --target $(targets "$B")
rm -rf cpubin
stage "$B" cpubin "$(git rev-parse --short HEAD)"
if [[ -n "$(git status --porcelain --untracked-files=no)" ]]; then echo "warning: uncommitted changes are in this build" >&2; fi
if [[ -n "${BEFORE:-}" ]]; then
    src=build-before-src
    commit=$(git rev-parse --short "$BEFORE")
    if [[ "$(cat "$src/.commit" 2>/dev/null)" != "$commit" ]]; then  # a plain copy of that commit's files
        rm -rf "$src" && mkdir -p "$src" && git archive "$commit" | tar -x -C "$src" && echo "$commit" > "$src/.commit"
    fi
    cmake -S "$src" -B "$src/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMSA_CUDA=OFF -DMSA_BUILD_TESTS=OFF \
        -DCMAKE_CXX_COMPILER_LAUNCHER=ccache >/dev/null
    cmake --build "$src/build" -j "${JOBS:-2}" --target $(targets "$src/build")
    stage "$src/build" cpubin/before "$commit"
fi
du -sh cpubin
ls -la cpubin cpubin/lib
