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
# Session 15, run 1: the 8-warp attention that splits P V by dims (no warp merge, pushed cluster merge) and the
# indexer without its arrival atomic where nothing is published, against session 14's kernels (ALT_REV=d183261),
# case by case in alternation, twice. (Session 14, run 9: the one-wave split rule refinement; run 8: the one-wave rule
# against the old rule, ALT_REV=c2b1e8d; run 7: attention splits around 32 x 32K; runs 4-5: the top-k's two-chunk
# load; run 3: splits, items per warp, page parts; run 2: the page-table entries in one load; run 1: the indexer with
# fewer instructions per page against session 13's kernels, ALT_REV=7221ba3.)
# Session 15, run 2: the row sums by MMA, queries through shared memory (128 registers), merge weights without a
# barrier, against run 1's kernels (ALT_REV=1648b90), and the indexer's early dependent launch (MSA_IDX_TRIGGER=2).
# Run 3: back to one CTA per SM (no register cap) and the queries loaded before the wait, row sums by MMA kept,
# weights broadcast before the sum, warp 0 starting its page copy after the pick; against run 1's kernels.
# Run 4: the top-k's picks by a butterfly of list merges (5 steps instead of 15 warp-max rounds) and the cluster
# merge's partials by st.async on each owner's barrier (no cluster barrier), against run 3's kernels (eae5056).
# Run 5: the same code with the warp-max top-k picks (new) and with the butterfly (alt: -DMSA_TOPK_BUTTERFLY=1), and
# the new code with the indexer's early dependent launch (early), also with ready flags (ready).
# Run 6 (the session's final code): the defaults (early launch for the 8-warp attention) against the late launch and
# against session 14's kernels (ALT_REV=d183261).
# Run 7: the top-k's first chunk sorted into the empty list without a merge; the 8-warp attention waiting for K
# before S and for V only before P V, fast division, log2 and exp2 in its normalisation and merge weights; against
# run 6's kernels (ALT_REV=79b2781).
# Run 8 (final code, with the full suite): batch-1 plan options on the new attention: half-page indexer items
# (MSA_IDX_PARTS=2) and 8 attention splits (two pages per CTA) against the defaults (quarter pages, 16 splits).
# Run 9: 8-warp attention CTAs beyond batch 1 (run 8: 2 x 8K 14.8 us with the 4-warp cluster of 16 splits, 10.4 with
# 8-warp CTAs and 8 splits): forced 8 warps with 2, 4, 8 and 16 splits against the plan's choice.
# Session 18:
# Run 1 (sweep above, replaced): the second 8-query wgmma indexer (MSA_Q8_WGMMA=3 then) against mma.sync and the first
# wgmma version, the alt build without the m-tile pipeline (-DMSA_Q8_PIPE=0), whole pages and items per warp.
# Run 2: lazy rescaling in the 4-warp attention (alt build: -DMSA_ATTN_LAZY=0, the old eager rescaling) on 8-query and
# one-query cases, in alternation, twice; then the 8-query cases with a persistent indexer of 2 or 3 CTAs per SM (the
# early-launched attention CTAs share the SMs with it), in request-major or grid order. (The MSA_ATTN_LAZY switch was
# removed after this run: no faster.)
# Run 4: the 8-query indexer's block maxima by a transposed butterfly, one store per lane (new), against run 3's kernels
# (alt: ALT_REV=cb82099), in alternation, twice; then plan options on the new kernels: 2 and 4 attention splits for 8
# queries, 12 index items per warp, the attention CTAs in request-major order.
# Run 6: the lean 4-warp attention (4 CTAs per SM: 128 registers, Q fragments in shared memory, two per-warp stages;
# auto for several queries) against run 4's kernels (alt: ALT_REV=ee41b47), twice in alternation; the new code with it
# off (MSA_ATTN_LEAN=1) and, for one query, on (=2).
C=32:131072:8,32:32768:8,8:32768:8,128:51200:8,8:204800:8,64:204800:8,1:32768:8
C1=32:131072:1,64:65536:1,32:32768:1,8:32768:1,128:8192:1
for rep in 1 2; do sw new$rep $C; asw old$rep $C; done
sw leanoff $C MSA_ATTN_LEAN=1
for rep in 1 2; do sw q1auto$rep $C1; sw q1lean$rep $C1 MSA_ATTN_LEAN=2; done; asw q1old $C1
SUM="$(dirname "$0")/summarize_sweep.py"; [ -f "$SUM" ] || SUM=bench/cuda/summarize_sweep.py
python3 "$SUM" "$R/dsweep.jsonl" "$R/bench.json" > "$R/dsweep.md" 2>&1
cat "$R/dsweep.md"
