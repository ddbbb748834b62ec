#!/bin/bash
# Decode plan-option sweep for run_gpu.sh (step dsweep): each variant runs msa_decode_bench in sel mode (full timing
# protocol) with some MSA_* options (msa_decode_bench.cu lists them) and a tag; output lines go to $R/dsweep.jsonl.
# Usage (from run_gpu.sh): R=<dir> BIN=<bin dir> LIM=<seconds per variant> bash bench/cuda/dsweep.sh
LAT=1:8192:1,1:32768:1,1:131072:1,8:32768:1
BIG=32:131072:1,64:65536:1,8:524288:1
Q8=32:131072:8,32:32768:8
sw() {  # tag cases [VAR=value ...]
  MSA_TAG=$1 timeout "${LIM:-60}" env "${@:3}" "$BIN/msa_decode_bench" sel "$2" >> "$R/dsweep.jsonl" 2>> "$R/dsweep.err"
}
asw() {  # the same with the alt build (decode kernels compiled with $BIN/alt_flags.txt)
  [ -x "$BIN/msa_decode_bench_alt" ] || return
  MSA_TAG=$1 timeout "${LIM:-60}" env "${@:3}" "$BIN/msa_decode_bench_alt" sel "$2" >> "$R/dsweep.jsonl" 2>> "$R/dsweep.err"
}
# Session 5, run E: the FP8 one-query indexer on wgmma (MSA_IDX_FP8=3) against mma.sync (default) and FP16 (=1).
# Earlier sweeps: docs/cuda-notes.md sections 13-16.
BIGS=32:131072:1,64:65536:1,8:524288:1,32:32768:1
sw new $LAT; sw wgmma $LAT MSA_IDX_FP8=3; sw fp16 $LAT MSA_IDX_FP8=1
sw new $BIGS; sw wgmma $BIGS MSA_IDX_FP8=3; sw fp16 $BIGS MSA_IDX_FP8=1
sw wgmma_parts4 1:131072:1,8:32768:1 MSA_IDX_FP8=3 MSA_IDX_PARTS=4; sw wgmma_parts1 $BIGS MSA_IDX_FP8=3 MSA_IDX_PARTS=1
SUM="$(dirname "$0")/summarize_sweep.py"; [ -f "$SUM" ] || SUM=bench/cuda/summarize_sweep.py
python3 "$SUM" "$R/dsweep.jsonl" "$R/bench.json" > "$R/dsweep.md" 2>&1
cat "$R/dsweep.md"
