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
# Session 5, run F: the wgmma FP8 indexer (now the default for one query) with its m-tile pipeline, against the same
# without the pipeline (alt build, -DMSA_WG_PIPE=0) and the mma.sync FP8 one (MSA_IDX_FP8=2). Earlier sweeps:
# docs/cuda-notes.md sections 13-16.
BIGS=32:131072:1,64:65536:1,8:524288:1,32:32768:1
sw new $LAT; asw nopipe $LAT; sw mma_sync $LAT MSA_IDX_FP8=2
sw new $BIGS; asw nopipe $BIGS; sw mma_sync $BIGS MSA_IDX_FP8=2; sw parts1 $BIGS MSA_IDX_PARTS=1; asw nopipe_parts1 $BIGS MSA_IDX_PARTS=1
SUM="$(dirname "$0")/summarize_sweep.py"; [ -f "$SUM" ] || SUM=bench/cuda/summarize_sweep.py
python3 "$SUM" "$R/dsweep.jsonl" "$R/bench.json" > "$R/dsweep.md" 2>&1
cat "$R/dsweep.md"
