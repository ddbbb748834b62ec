#!/bin/bash
# Decode plan-option sweep for run_gpu.sh (step dsweep): each variant runs msa_decode_bench in sel mode (full timing
# protocol) with some MSA_* options (msa_decode_bench.cu lists them) and a tag; output lines go to $R/dsweep.jsonl.
# Usage (from run_gpu.sh): R=<dir> BIN=<bin dir> LIM=<seconds per variant> bash bench/cuda/dsweep.sh
LAT=1:8192:1,1:32768:1,1:131072:1,8:32768:1
BIG=32:131072:1,64:65536:1,8:524288:1
Q8=32:131072:8,32:32768:8
MID=2:8192:1,4:32768:1,32:32768:1
sw() {  # tag cases [VAR=value ...]
  MSA_TAG=$1 timeout "${LIM:-60}" env "${@:3}" "$BIN/msa_decode_bench" sel "$2" >> "$R/dsweep.jsonl" 2>> "$R/dsweep.err"
}
asw() {  # the same with the alt build (decode kernels compiled with $BIN/alt_flags.txt)
  [ -x "$BIN/msa_decode_bench_alt" ] || return
  MSA_TAG=$1 timeout "${LIM:-60}" env "${@:3}" "$BIN/msa_decode_bench_alt" sel "$2" >> "$R/dsweep.jsonl" 2>> "$R/dsweep.err"
}
# Session 14, run 3: plan options around the final kernels, now that the indexer scores ~20% faster: attention
# splits (fewer CTAs: one resident wave at 3 splits for 32 x 4 units), items per warp, whole or quarter pages.
# (Run 2: the page-table entries of a warp's items in one load against run 1's kernels, ALT_REV=98396f4; run 1: the
# indexer with fewer instructions per page against session 13's kernels, ALT_REV=7221ba3.)
C=$BIG,32:32768:1,8:32768:1
sw base1 $C; sw splits3 $C MSA_SPLITS=3; sw splits2 $C MSA_SPLITS=2; sw splits6 $C MSA_SPLITS=6
sw base2 $C; sw ppw4 $C MSA_IDX_PPW=4; sw ppw16 $C MSA_IDX_PPW=16; sw parts1 $C MSA_IDX_PARTS=1; sw parts4 $C MSA_IDX_PARTS=4
SUM="$(dirname "$0")/summarize_sweep.py"; [ -f "$SUM" ] || SUM=bench/cuda/summarize_sweep.py
python3 "$SUM" "$R/dsweep.jsonl" "$R/bench.json" > "$R/dsweep.md" 2>&1
cat "$R/dsweep.md"
