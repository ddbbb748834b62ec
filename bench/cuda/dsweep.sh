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
# Session 14, run 5 (and 4): the top-k loads a row's first 1024 block scores in one round trip (new; run 5: only for
# rows of more than 512 blocks, a separate instantiation) against run 3's kernels
# (ALT_REV=aeeca79), case by case in alternation, twice. (Run 3: attention splits, items per warp, page parts;
# run 2: the page-table entries of a warp's items in one load against run 1's kernels; run 1: the indexer with fewer
# instructions per page against session 13's kernels, ALT_REV=7221ba3.)
C=$LAT,$BIG,$Q8,$MID
for rep in 1 2; do
  sw new$rep $C; asw old$rep $C
done
SUM="$(dirname "$0")/summarize_sweep.py"; [ -f "$SUM" ] || SUM=bench/cuda/summarize_sweep.py
python3 "$SUM" "$R/dsweep.jsonl" "$R/bench.json" > "$R/dsweep.md" 2>&1
cat "$R/dsweep.md"
