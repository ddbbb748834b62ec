#!/bin/bash
# One-shot GPU run: build (nvcc), correctness test, compute-sanitizer, benchmark. Results under $OUT.
set -x
NVCC=${NVCC:-/usr/local/cuda/bin/nvcc}
F="-std=c++20 -O3 -gencode=arch=compute_90a,code=sm_90a --expt-relaxed-constexpr -lineinfo -Isrc"
mkdir -p b
$NVCC $F -c src/kernels/cuda/msa_decode.cu -o b/k.o &
$NVCC $F -c tests/cuda/msa_decode_test.cu -o b/t.o &
$NVCC $F -c bench/cuda/msa_decode_bench.cu -o b/b.o &
wait
$NVCC $F b/k.o b/t.o -o b/msa_decode_test && $NVCC $F b/k.o b/b.o -o b/msa_decode_bench
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
timeout 120 b/msa_decode_test > $OUT/test.log 2>&1; echo "test rc=$?" >> $OUT/test.log
CS=/usr/local/cuda/bin/compute-sanitizer
timeout 90 $CS --tool memcheck b/msa_decode_test --small > $OUT/memcheck.log 2>&1; echo "rc=$?" >> $OUT/memcheck.log
timeout 90 $CS --tool racecheck b/msa_decode_test --small > $OUT/racecheck.log 2>&1; echo "rc=$?" >> $OUT/racecheck.log
timeout ${BENCH_T:-200} b/msa_decode_bench > $OUT/bench.json 2> $OUT/bench.err; echo "bench rc=$?" >> $OUT/bench.err
tail -3 $OUT/test.log $OUT/memcheck.log $OUT/racecheck.log
cat $OUT/bench.json | head -60
