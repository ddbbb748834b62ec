#!/bin/bash
# One-shot GPU run of the CUDA MSA decode path: correctness test, benchmark, SASS statistics, Nsight Compute,
# compute-sanitizer. Usage, in the repository root on the GPU machine:
#   OUT=<dir> BIN=<dir with msa_decode_test/msa_decode_bench> bash bench/cuda/run_gpu.sh [steps]
# steps: comma list, run in the order given, of test,quick,full,full_alt,sass,ncu,memcheck,racecheck
# (full_alt: the suite with $BIN/msa_decode_bench_alt, e.g. a build with -DMSA_FP4_SHIFTS=0, into bench_alt.json)
# (default test,full,sass,ncu,memcheck,racecheck). Per-step time limits: TEST_T, BENCH_T, NCU_T, SAN_T seconds.
# Prebuilt binaries in $BIN are used when they load on this machine, else everything is built here with nvcc.
set -x
OUTD=${OUT:-gpu_out}; mkdir -p "$OUTD"
BIN=${BIN:-b}
STEPS=${1:-test,full,sass,ncu,memcheck,racecheck}
if ! "$BIN/msa_decode_test" --noop 2>/dev/null; then
  BIN=b; NVCC=${NVCC:-/usr/local/cuda/bin/nvcc}; mkdir -p b
  F="-std=c++20 -O3 -gencode=arch=compute_90a,code=sm_90a --expt-relaxed-constexpr -lineinfo -Isrc"
  $NVCC $F -c src/kernels/cuda/msa_decode.cu -o b/k.o & $NVCC $F -c src/kernels/cuda/msa_decode_simt.cu -o b/s.o &
  $NVCC $F -c tests/cuda/msa_decode_test.cu -o b/t.o & $NVCC $F -c bench/cuda/msa_decode_bench.cu -o b/b.o &
  wait
  $NVCC $F b/k.o b/s.o b/t.o -o b/msa_decode_test && $NVCC $F b/k.o b/s.o b/b.o -o b/msa_decode_bench
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > "$OUTD/gpu.txt"
CS=/usr/local/cuda/bin/compute-sanitizer
for step in ${STEPS//,/ }; do
  case $step in
    test)
      timeout ${TEST_T:-300} "$BIN/msa_decode_test" > "$OUTD/test.log" 2>&1; echo "test rc=$?" >> "$OUTD/test.log"
      grep -E "decode \[|FAIL|rc=" "$OUTD/test.log" | grep -v "PASS$" | head -40; grep -c "PASS$" "$OUTD/test.log";;
    quick|full)
      timeout ${BENCH_T:-300} "$BIN/msa_decode_bench" $step > "$OUTD/bench.json" 2>> "$OUTD/bench.err"
      echo "bench rc=$?" >> "$OUTD/bench.err"; tail -1 "$OUTD/bench.err"; python3 bench/cuda/summarize.py "$OUTD/bench.json";;
    full_alt)
      if [ -x "$BIN/msa_decode_bench_alt" ]; then
        timeout ${BENCH_T:-300} "$BIN/msa_decode_bench_alt" full > "$OUTD/bench_alt.json" 2>> "$OUTD/bench.err"
        echo "bench_alt rc=$?" >> "$OUTD/bench.err"; tail -1 "$OUTD/bench.err"
        python3 bench/cuda/summarize.py "$OUTD/bench_alt.json" | cut -c1-60; fi;;
    sass)
      /usr/local/cuda/bin/cuobjdump -sass "$BIN/msa_decode_bench" | python3 bench/cuda/sass_stats.py --stats-only > "$OUTD/sass.txt" 2>&1
      cut -c1-300 "$OUTD/sass.txt";;
    ncu)
      for c in "32 131072 1" "32 131072 8" "1 32768 1"; do
        timeout ${NCU_T:-120} ncu --clock-control none --section SpeedOfLight --section Occupancy --section LaunchStats \
          --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis --section WarpStateStats \
          -k regex:"index_topk|attn_kernel" -c 2 "$BIN/msa_decode_bench" case $c
      done > "$OUTD/ncu.txt" 2>&1
      grep -E "index_topk|attn_kernel|Duration|DRAM Throughput|Compute \(SM\) Th|Achieved Occ|Issued Ipc|Warp Cycles Per Issued" "$OUTD/ncu.txt" | head -60;;
    memcheck|racecheck)
      timeout ${SAN_T:-240} $CS --tool $step "$BIN/msa_decode_test" --small > "$OUTD/$step.log" 2>&1
      echo "rc=$?" >> "$OUTD/$step.log"; tail -3 "$OUTD/$step.log";;
  esac
done
