#!/bin/bash
# Builds the CUDA targets on this machine (nvcc 13.0, no GPU needed; repository CMake, -j2) and stages them for the
# GPU machine in $DEST (default gpubin/, ignored by git through the shared info/exclude), with the shared libraries
# that machine lacks (libfmt, libgomp). Then, on the GPU: run with carry ["$DEST"]: `OUT=$OUT BIN=$DEST bash
# bench/cuda/run_gpu.sh`. With ALT_FLAGS set (e.g. ALT_FLAGS=-DMSA_IDX_MIN_CTAS=5), also builds
# $DEST/msa_decode_bench_alt: the decode benchmark with the decode kernels compiled with those extra flags (run_gpu.sh
# steps full_alt / asweep), and records the flags in $DEST/alt_flags.txt. ALT_REV=<commit> builds the alt benchmark
# from that commit's msa_decode.cu instead (a same-run A/B against older kernels; ALT_FLAGS may then be empty: " ").
set -e
B=${BUILD:-build-cuda}
DEST=${DEST:-gpubin}
LAUNCH=(); command -v ccache > /dev/null && LAUNCH=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMSA_CUDA=ON "${LAUNCH[@]}" > /dev/null
cmake --build "$B" -j2 --target msa_cuda_decode_test msa_cuda_prefill_test msa_cuda_decode_bench msa_cuda_prefill_bench
rm -rf "$DEST" && mkdir -p "$DEST/lib"
cp "$B/tests/cuda/msa_cuda_decode_test" "$DEST/msa_decode_test"
cp "$B/tests/cuda/msa_cuda_prefill_test" "$DEST/msa_prefill_test"
cp "$B/bench/cuda/msa_cuda_decode_bench" "$DEST/msa_decode_bench"
cp "$B/bench/cuda/msa_cuda_prefill_bench" "$DEST/msa_prefill_bench"
for lib in $(ldd "$DEST/msa_prefill_test" | awk '/libfmt|libgomp|libspdlog/ {print $3}'); do cp -L "$lib" "$DEST/lib/"; done
NVCC=${NVCC:-/usr/local/cuda/bin/nvcc}
F="-std=c++20 -O3 -gencode=arch=compute_90a,code=sm_90a --expt-relaxed-constexpr -lineinfo -Isrc"
# A decode benchmark by nvcc alone: decode_bench <build dir> <msa_decode.cu source> <output> [extra nvcc flags...]
decode_bench() {
  local dir=$1 src=$2 out=$3; shift 3
  mkdir -p "$dir"
  $NVCC $F "$@" -c "$src" -o "$dir/msa_decode.o" &
  $NVCC $F -c src/kernels/cuda/msa_decode_simt.cu -o "$dir/msa_decode_simt.o"
  wait
  $NVCC $F -c bench/cuda/msa_decode_bench.cu -o "$dir/msa_decode_bench.o"
  $NVCC $F "$dir/msa_decode.o" "$dir/msa_decode_simt.o" "$dir/msa_decode_bench.o" -o "$out"
}
if [ -n "$ALT_FLAGS" ]; then
  SRC=src/kernels/cuda/msa_decode.cu
  [ -n "$ALT_REV" ] && SRC=src/kernels/cuda/msa_decode_alt_rev.cu  # untracked, removed below
  [ -n "$ALT_REV" ] && git show "$ALT_REV:src/kernels/cuda/msa_decode.cu" > "$SRC"
  # shellcheck disable=SC2086  # ALT_FLAGS is a list of flags
  decode_bench "$B/alt" "$SRC" "$DEST/msa_decode_bench_alt" $ALT_FLAGS
  [ -n "$ALT_REV" ] && rm -f "$SRC"
  echo "$ALT_FLAGS${ALT_REV:+ (msa_decode.cu of $ALT_REV)}" > "$DEST/alt_flags.txt"
fi
# TRACE=1: also $DEST/msa_decode_bench_trace, the decode benchmark with the current kernels built with
# -DMSA_DECODE_TRACE (its `trace B:L:q,...` mode prints the phase timeline; bench/cuda/trace_table.py tables it), so
# that one run can hold both an A/B against older kernels (ALT_REV) and a trace of the new ones.
[ -n "$TRACE" ] && decode_bench "$B/trace" src/kernels/cuda/msa_decode.cu "$DEST/msa_decode_bench_trace" -DMSA_DECODE_TRACE
# PF_ALT_REV=<commit>: also $DEST/msa_prefill_bench_alt, the prefill benchmark with that commit's msa_prefill.cu,
# msa_prefill.h and msa_prefill_bench.cu, for a same-run A/B (run_gpu.sh step pbalt); PF_ALT_FLAGS: extra nvcc flags
# for its msa_prefill.cu (alone: the working tree's kernels built with them, e.g. PF_ALT_FLAGS=-DMSA_PF_Q8S_CTAS=3).
if [ -n "$PF_ALT_REV$PF_ALT_FLAGS" ]; then
  A="$B/pfalt"; mkdir -p "$A/kernels/cuda"
  if [ -n "$PF_ALT_REV" ]; then  # that commit's benchmark too: its options are those of its msa_prefill.h
    git show "$PF_ALT_REV:src/kernels/cuda/msa_prefill.cu" > "$A/kernels/cuda/msa_prefill.cu"
    git show "$PF_ALT_REV:src/kernels/cuda/msa_prefill.h" > "$A/kernels/cuda/msa_prefill.h"
    git show "$PF_ALT_REV:bench/cuda/msa_prefill_bench.cu" > "$A/msa_prefill_bench.cu"
  else
    cp src/kernels/cuda/msa_prefill.cu src/kernels/cuda/msa_prefill.h "$A/kernels/cuda/"
    cp bench/cuda/msa_prefill_bench.cu "$A/msa_prefill_bench.cu"
  fi
  cp src/kernels/cuda/msa_decode_internal.h src/kernels/cuda/msa_device.cuh src/kernels/cuda/msa_decode.h \
    src/kernels/cuda/fp4_bits.h "$A/kernels/cuda/"
  # shellcheck disable=SC2086  # PF_ALT_FLAGS is a list of flags
  $NVCC -I"$A" $F $PF_ALT_FLAGS -c "$A/kernels/cuda/msa_prefill.cu" -o "$A/msa_prefill.o" &
  $NVCC -I"$A" $F -c "$A/msa_prefill_bench.cu" -o "$A/msa_prefill_bench.o" &
  $NVCC $F -c src/kernels/cuda/msa_decode.cu -o "$A/msa_decode.o" &
  $NVCC $F -c src/kernels/cuda/msa_decode_simt.cu -o "$A/msa_decode_simt.o"
  wait
  $NVCC $F "$A"/msa_prefill.o "$A"/msa_decode.o "$A"/msa_decode_simt.o "$A"/msa_prefill_bench.o \
    -o "$DEST/msa_prefill_bench_alt"
  echo "${PF_ALT_REV:-working tree} $PF_ALT_FLAGS" > "$DEST/pf_alt_rev.txt"
fi
# STAGE=prefill leaves out the decode binaries (the device tool carries at most 64 MiB with the working tree)
[ "${STAGE:-all}" = prefill ] && rm -f "$DEST/msa_decode_test" "$DEST/msa_decode_bench"
strip "$DEST"/msa_* 2>/dev/null || true
git rev-parse HEAD > "$DEST/commit.txt"
EXCL="$(git rev-parse --git-common-dir)/info/exclude"
grep -qx "/$DEST/" "$EXCL" 2>/dev/null || echo "/$DEST/" >> "$EXCL"
# PACK=1: also gpupack/$DEST.tar.xz (about 1.5 MB instead of 20: the device tool carries at most 64 MiB with the
# working tree, which is about 50 MiB). Carry ["gpupack"] and start the command with `tar xJf gpupack/$DEST.tar.xz &&`.
if [ -n "$PACK" ]; then
  mkdir -p gpupack && tar cJf "gpupack/$DEST.tar.xz" "$DEST"
  grep -qx "/gpupack/" "$EXCL" 2>/dev/null || echo "/gpupack/" >> "$EXCL"
  ls -la gpupack
fi
ls -la "$DEST" "$DEST/lib"
