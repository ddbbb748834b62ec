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
sw new $LAT; sw grid_wait $LAT MSA_READY=1; sw idx_no_pdl $LAT MSA_IDX_PDL=1; sw warps8 $LAT MSA_ATTN_WARPS=8
sw warp_pipe $LAT MSA_WARP_PIPE=2; sw ws_merge $LAT MSA_CLUSTER=1; sw no_pdl $LAT MSA_NO_PDL=1
sw v4like $LAT MSA_CLUSTER=1 MSA_IDX_PERSIST=1 MSA_READY=1 MSA_IDX_PDL=1; sw parts2 $LAT MSA_IDX_PARTS=2
sw splits8 $LAT MSA_SPLITS=8; sw splits8_w8 $LAT MSA_SPLITS=8 MSA_ATTN_WARPS=8; asw min5 $LAT
sw new $BIG; sw grid_wait $BIG MSA_READY=1; sw warp_pipe $BIG MSA_WARP_PIPE=2; asw min5 $BIG
sw cluster $BIG MSA_CLUSTER=2; sw grid $BIG MSA_IDX_PERSIST=1
sw new $Q8; sw grid_wait $Q8 MSA_READY=1; sw warp_pipe $Q8 MSA_WARP_PIPE=2; sw parts2 $Q8 MSA_IDX_PARTS=2
SUM="$(dirname "$0")/summarize_sweep.py"; [ -f "$SUM" ] || SUM=bench/cuda/summarize_sweep.py
python3 "$SUM" "$R/dsweep.jsonl" "$R/bench.json" > "$R/dsweep.md" 2>&1
cat "$R/dsweep.md"
