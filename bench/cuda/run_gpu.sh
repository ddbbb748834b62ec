#!/bin/bash
# One-shot GPU run of the CUDA MSA decode path: correctness test, compute-sanitizer, benchmark, Nsight Compute.
# Usage, in the repository root on the GPU machine:
#   OUT=<dir> BIN=<dir with msa_decode_test/msa_decode_bench> bash bench/cuda/run_gpu.sh [steps]
# steps: comma list of test,memcheck,racecheck,quick,full,ncu (default: all but quick). Prebuilt binaries in $BIN
# are used when they load on this machine, else everything is built here with nvcc (about a minute).
set -x
OUTD=${OUT:-gpu_out}; mkdir -p "$OUTD"
BIN=${BIN:-b}
STEPS=${1:-test,memcheck,racecheck,full,ncu}
has() { [[ ",$STEPS," == *",$1,"* ]]; }
if ! "$BIN/msa_decode_test" --noop 2>/dev/null; then
  BIN=b; NVCC=${NVCC:-/usr/local/cuda/bin/nvcc}; mkdir -p b
  F="-std=c++20 -O3 -gencode=arch=compute_90a,code=sm_90a --expt-relaxed-constexpr -lineinfo -Isrc"
  $NVCC $F -c src/kernels/cuda/msa_decode.cu -o b/k.o & $NVCC $F -c src/kernels/cuda/msa_decode_simt.cu -o b/s.o &
  $NVCC $F -c tests/cuda/msa_decode_test.cu -o b/t.o & $NVCC $F -c bench/cuda/msa_decode_bench.cu -o b/b.o &
  wait
  $NVCC $F b/k.o b/s.o b/t.o -o b/msa_decode_test && $NVCC $F b/k.o b/s.o b/b.o -o b/msa_decode_bench
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > "$OUTD/gpu.txt"
if has test; then timeout ${TEST_T:-300} "$BIN/msa_decode_test" > "$OUTD/test.log" 2>&1; echo "test rc=$?" >> "$OUTD/test.log"
  grep -E "decode \[|case |FAIL|rc=" "$OUTD/test.log" | head -60; fi
CS=/usr/local/cuda/bin/compute-sanitizer
for tool in memcheck racecheck; do
  if has $tool; then timeout ${SAN_T:-240} $CS --tool $tool "$BIN/msa_decode_test" --small > "$OUTD/$tool.log" 2>&1
    echo "rc=$?" >> "$OUTD/$tool.log"; tail -3 "$OUTD/$tool.log"; fi
done
for mode in quick full; do
  if has $mode; then timeout ${BENCH_T:-300} "$BIN/msa_decode_bench" $mode > "$OUTD/bench.json" 2> "$OUTD/bench.err"
    echo "bench rc=$?" >> "$OUTD/bench.err"; cat "$OUTD/bench.err"; python3 bench/cuda/summarize.py "$OUTD/bench.json"; fi
done
if has ncu; then
  for c in "32 131072 1" "32 131072 8" "1 32768 1"; do
    timeout 120 ncu --clock-control none --section SpeedOfLight --section Occupancy --section LaunchStats \
      --section MemoryWorkloadAnalysis -k regex:"index_topk|attn_kernel" -c 2 "$BIN/msa_decode_bench" case $c
  done > "$OUTD/ncu.txt" 2>&1
  grep -E "index_topk|attn_kernel|Duration|Memory Throughput|DRAM Throughput|Compute \(SM\)|Registers|Achieved Occ" "$OUTD/ncu.txt" | head -60
fi
