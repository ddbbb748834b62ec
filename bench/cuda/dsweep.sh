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
# Session 5, run H: the 8-query indexer on wgmma m64n32k16 (MSA_Q8_WGMMA=2, or 3: descriptor offsets exchanged).
# Earlier sweeps: docs/cuda-notes.md sections 13-16.
sw new $Q8; sw q8wg $Q8 MSA_Q8_WGMMA=2; sw q8wgx $Q8 MSA_Q8_WGMMA=3; sw q8wg_parts2 $Q8 MSA_Q8_WGMMA=2 MSA_IDX_PARTS=2
sw q8wgx_parts2 $Q8 MSA_Q8_WGMMA=3 MSA_IDX_PARTS=2
SUM="$(dirname "$0")/summarize_sweep.py"; [ -f "$SUM" ] || SUM=bench/cuda/summarize_sweep.py
python3 "$SUM" "$R/dsweep.jsonl" "$R/bench.json" > "$R/dsweep.md" 2>&1
cat "$R/dsweep.md"
