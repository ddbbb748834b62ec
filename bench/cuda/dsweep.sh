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
# Session 13, run 3: the final defaults (early dependent launch without clusters, grid-order attention CTAs) against
# the late launch, then attention splits and indexer items per warp under the early launch (docs/cuda-notes.md
# section 20). Earlier sweeps: sections 13-17 and this section's run 2.
ALL=$LAT,$MID,$BIG,$Q8
NC=32:32768:1,32:131072:1,64:65536:1
sw new1 $ALL; sw late $ALL MSA_IDX_TRIGGER=1; sw new2 $ALL
for n in 2 3 6; do sw splits$n $NC MSA_SPLITS=$n; done
for n in 4 12 16; do sw ppw$n $NC,$Q8 MSA_IDX_PPW=$n; done
sw topk_attn $NC MSA_ATTN_TOPK=2
SUM="$(dirname "$0")/summarize_sweep.py"; [ -f "$SUM" ] || SUM=bench/cuda/summarize_sweep.py
python3 "$SUM" "$R/dsweep.jsonl" "$R/bench.json" > "$R/dsweep.md" 2>&1
cat "$R/dsweep.md"
