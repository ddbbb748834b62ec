#!/bin/bash
# One-shot GPU run of the CUDA MSA kernels: correctness tests, compute-sanitizer, benchmarks, the comparisons of
# workloads.md section 3 (PyTorch SDPA dense, plain PyTorch MSA), summary tables. Usage, in the repository root on
# the GPU machine (binaries staged by bench/cuda/stage_gpu_bins.sh and carried as gpubin/):
#   OUT=<dir> BIN=gpubin bash bench/cuda/run_gpu.sh [steps]
# steps: comma list, run in the order given, of
#   ptest      prefill test against the CPU kernels (needs the staged binary: the oracle links the CPU library)
#   pbench     prefill set of workloads.md (msa_prefill_bench);  pbmma  the same with the mma.sync kernels
#              (MSA_PF_WGMMA=0);  pbq8  the same in msa.md's Q8KV4 contract (FP8 indexer and P V:
#              MSA_PF_Q8IDX=1 MSA_PF_Q8ATTN=1), pbq8i / pbq8a  the indexer / the attention only;
#              pbq8s / pbq8as  pbq8 / pbq8a with the attention's scores on FP8 MMAs too (MSA_PF_Q8S=1);
#              pbalt  the same with the kernels of $BIN/pf_alt_rev.txt (msa_prefill_bench_alt; pbalts: in pbq8s's
#              numerics);
#              pbreg  the same with the per-pass register-A wgmma indexer (MSA_PF_IDX=pass);
#              pbench2  mma.sync with 2 gathered queries per attention warp (MSA_PF_QPW=2);
#              pncu2  Nsight Compute of that attention kernel
#   torch      dense SDPA + plain PyTorch MSA, decode and prefill (bench/cuda/torch_compare.py)
#   trace      phase timeline of $BIN/msa_decode_bench_trace (TRACE_CASES);
#   test       decode test;  quick|full  decode benchmark suites;  full_alt  suite with $BIN/msa_decode_bench_alt
#   dsweep     decode plan options (bench/cuda/dsweep.sh: MSA_* switches of msa_decode_bench) on the latency, large
#              and 8-query cases (bench sel mode), tabled by summarize_sweep.py
#   pmemcheck|pracecheck  compute-sanitizer on the small prefill cases;  memcheck|racecheck  on the decode test
#   sass|ncu   SASS statistics / Nsight Compute of decode;  ncusrc  full set + per-SASS-line stalls, 8 queries;  pncu  Nsight Compute of the prefill kernels (PNCU_CASE, default 8K on 32K)
#   pncusrc    full set + per-SASS-line stalls of one prefill kernel (PNCU_KERNEL regex, default pf_attn; PNCU_CASE
#              "chunk total", default "8192 40960": 8K on 32K)
# default: ptest,pbench,pbench2,torch,test,pmemcheck,pracecheck,pncu,pncu2,quick. Every step has its own time limit and a global
# budget TOTAL_T (default 500 s) caps them; a failing step does not stop the others. At the end everything is packed
# into $OUT/results.tgz and the summary tables are printed (and kept as $OUT/summary.md).
# When the staged binaries do not load, the decode test/bench and prefill bench are built here with nvcc (the
# prefill test is then skipped: its oracle needs the CPU library and its dependencies).

OUTD=${OUT:-gpu_out}; mkdir -p "$OUTD/r"; R="$OUTD/r"
BIN=${BIN:-gpubin}
export LD_LIBRARY_PATH="$PWD/$BIN/lib:$LD_LIBRARY_PATH"
STEPS=${1:-ptest,pbench,pbench2,torch,test,pmemcheck,pracecheck,pncu,pncu2,quick}
START=$(date +%s); TOTAL_T=${TOTAL_T:-500}
lim() { local left=$(( TOTAL_T - ($(date +%s) - START) )); [ "$left" -lt "$1" ] && echo $(( left > 5 ? left : 5 )) || echo "$1"; }
# Do the staged binaries load here? (A prefill-only staging, STAGE=prefill, carries no decode binaries.)
if [ -x "$BIN/msa_decode_test" ]; then "$BIN/msa_decode_test" --noop 2>/dev/null; else
  ! ldd "$BIN/msa_prefill_bench" 2>&1 | grep -q "not found"; fi
if [ $? -ne 0 ]; then
  echo "staged binaries do not load here: building with nvcc" | tee "$R/build.log"
  BIN=b; NVCC=${NVCC:-/usr/local/cuda/bin/nvcc}; mkdir -p b
  F="-std=c++20 -O3 -gencode=arch=compute_90a,code=sm_90a --expt-relaxed-constexpr -lineinfo -Isrc"
  for f in src/kernels/cuda/msa_decode.cu src/kernels/cuda/msa_decode_simt.cu src/kernels/cuda/msa_prefill.cu \
           tests/cuda/msa_decode_test.cu bench/cuda/msa_decode_bench.cu bench/cuda/msa_prefill_bench.cu; do
    $NVCC $F -c $f -o b/$(basename $f .cu).o >> "$R/build.log" 2>&1 &
  done
  wait
  K="b/msa_decode.o b/msa_decode_simt.o b/msa_prefill.o"
  $NVCC $F $K b/msa_decode_test.o -o b/msa_decode_test >> "$R/build.log" 2>&1
  $NVCC $F $K b/msa_decode_bench.o -o b/msa_decode_bench >> "$R/build.log" 2>&1
  $NVCC $F $K b/msa_prefill_bench.o -o b/msa_prefill_bench >> "$R/build.log" 2>&1
  tail -5 "$R/build.log"
fi
cat "$BIN/commit.txt" > "$R/commit.txt" 2>/dev/null
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > "$R/gpu.txt"
CS=/usr/local/cuda/bin/compute-sanitizer
for step in ${STEPS//,/ }; do
  echo "=== step $step at $(( $(date +%s) - START )) s" >> "$R/steps.log"
  case $step in
    ptest)
      if [ -x "$BIN/msa_prefill_test" ]; then
        timeout $(lim 300) "$BIN/msa_prefill_test" > "$R/ptest.log" 2>&1; echo "ptest rc=$?" >> "$R/ptest.log"
        grep -E "prefill \[|FAIL|rc=|case " "$R/ptest.log" | head -40
      else echo "no prefill test binary" > "$R/ptest.log"; fi;;
    pbench)
      timeout $(lim 100) "$BIN/msa_prefill_bench" set > "$R/pbench.json" 2>> "$R/pbench.err"
      echo "pbench rc=$?" >> "$R/pbench.err"; tail -2 "$R/pbench.err"; cat "$R/pbench.json";;
    pbmma)
      MSA_PF_WGMMA=0 timeout $(lim 100) "$BIN/msa_prefill_bench" set > "$R/pbench_mma.json" 2>> "$R/pbench_mma.err"
      echo "pbmma rc=$?" >> "$R/pbench_mma.err"; tail -2 "$R/pbench_mma.err";;
    pbq8|pbq8i|pbq8a|pbq8s|pbq8as)  # Q8KV4 indexer and attention / indexer only / attention only; FP8 scores
      I=$([[ $step = pbq8a* ]] && echo 0 || echo 1); A=$([ $step = pbq8i ] && echo 0 || echo 1)
      S=$([[ $step = *s ]] && echo 1 || echo 0)
      MSA_PF_Q8IDX=$I MSA_PF_Q8ATTN=$A MSA_PF_Q8S=$S timeout $(lim 100) "$BIN/msa_prefill_bench" set > "$R/pbench_${step#pb}.json" \
        2>> "$R/pbench_${step#pb}.err"
      echo "$step rc=$?" >> "$R/pbench_${step#pb}.err"; tail -2 "$R/pbench_${step#pb}.err";;
    pbalt|pbalts)  # the prefill benchmark of other kernels (stage_gpu_bins.sh PF_ALT_REV / PF_ALT_FLAGS)
      S=$([ $step = pbalts ] && echo 1 || echo 0)
      [ -x "$BIN/msa_prefill_bench_alt" ] && MSA_PF_Q8IDX=$S MSA_PF_Q8ATTN=$S MSA_PF_Q8S=$S timeout $(lim 100) \
        "$BIN/msa_prefill_bench_alt" set > "$R/pbench_${step#pb}.json" 2>> "$R/pbench_${step#pb}.err"
      echo "$step rc=$?" >> "$R/pbench_${step#pb}.err"; tail -2 "$R/pbench_${step#pb}.err";;
    pbreg)
      MSA_PF_IDX=pass timeout $(lim 100) "$BIN/msa_prefill_bench" set > "$R/pbench_reg.json" 2>> "$R/pbench_reg.err"
      echo "pbreg rc=$?" >> "$R/pbench_reg.err"; tail -2 "$R/pbench_reg.err";;
    pbench2)
      MSA_PF_WGMMA=0 MSA_PF_QPW=2 timeout $(lim 100) "$BIN/msa_prefill_bench" set > "$R/pbench2.json" 2>> "$R/pbench2.err"
      echo "pbench2 rc=$?" >> "$R/pbench2.err"; tail -2 "$R/pbench2.err";;
    pncu2)
      MSA_PF_WGMMA=0 MSA_PF_QPW=2 timeout $(lim 100) ncu --clock-control none --section SpeedOfLight --section Occupancy \
        --section LaunchStats --section ComputeWorkloadAnalysis --section WarpStateStats -k regex:"pf_attn" -c 1 \
        "$BIN/msa_prefill_bench" case 8192 40960 > "$R/pncu2.txt" 2>&1
      grep -E "pf_|Duration|L1/TEX Cache|Achieved Occ|Issued Ipc" "$R/pncu2.txt" | head -12;;
    torch)
      PYTHONUNBUFFERED=1 timeout $(lim 140) python3 bench/cuda/torch_compare.py "$R/torch.json" > "$R/torch.log" 2>&1
      echo "torch rc=$?" >> "$R/torch.log"; tail -16 "$R/torch.log";;
    dsweep)
      DS="$(dirname "$0")/dsweep.sh"; [ -f "$DS" ] || DS=bench/cuda/dsweep.sh  # next to this script, else in the tree
      R="$R" BIN="$BIN" LIM=$(lim 60) bash "$DS";;
    trace)  # phase timeline of the trace build (stage with TRACE=1), TRACE_CASES (B:L:q,...)
      [ -x "$BIN/msa_decode_bench_trace" ] && timeout $(lim 60) "$BIN/msa_decode_bench_trace" trace \
        ${TRACE_CASES:-1:32768:1,1:131072:1,32:131072:1,32:131072:8} > "$R/trace.jsonl" 2>> "$R/trace.err"
      python3 bench/cuda/trace_table.py "$R/trace.jsonl" > "$R/trace.md" 2>&1; cat "$R/trace.md";;
    test)
      timeout $(lim 150) "$BIN/msa_decode_test" > "$R/test.log" 2>&1; echo "test rc=$?" >> "$R/test.log"
      grep -E "decode \[|FAIL|rc=" "$R/test.log" | grep -v "PASS$" | head -20; grep -c "PASS$" "$R/test.log";;
    quick|full)
      timeout $(lim $([ $step = full ] && echo 200 || echo 60)) "$BIN/msa_decode_bench" $step > "$R/bench.json" 2>> "$R/bench.err"
      echo "bench rc=$?" >> "$R/bench.err"; tail -1 "$R/bench.err";;
    full_alt)
      if [ -x "$BIN/msa_decode_bench_alt" ]; then
        timeout $(lim 300) "$BIN/msa_decode_bench_alt" full > "$R/bench_alt.json" 2>> "$R/bench.err"
        echo "bench_alt rc=$?" >> "$R/bench.err"; fi;;
    sass)
      /usr/local/cuda/bin/cuobjdump -sass "$BIN/msa_decode_bench" | python3 bench/cuda/sass_stats.py --stats-only > "$R/sass.txt" 2>&1
      [ -x "$BIN/msa_decode_bench_alt" ] && /usr/local/cuda/bin/cuobjdump -sass "$BIN/msa_decode_bench_alt" |
        python3 bench/cuda/sass_stats.py --stats-only > "$R/sass_alt.txt" 2>&1;;
    ncusrc)  # full Nsight Compute set of both decode kernels (NCU_CASE="batch len q_len", default 32 x 128K with 8
             # queries), with per-SASS-line stalls
      timeout $(lim 200) ncu --clock-control none --set full --import-source no -k regex:"index_topk|attn_kernel" -c 2 \
        -o "$R/q8" "$BIN/msa_decode_bench" case ${NCU_CASE:-32 131072 8} > "$R/ncusrc.log" 2>&1
      ncu -i "$R/q8.ncu-rep" --page details > "$R/ncu_q8_details.txt" 2>&1
      ncu -i "$R/q8.ncu-rep" --page source --csv --print-source sass 2>/dev/null | gzip > "$R/ncu_q8_source.csv.gz"
      rm -f "$R/q8.ncu-rep"; grep -E "index_topk|attn_kernel|Duration|Issued Ipc|Achieved Occ" "$R/ncu_q8_details.txt" | head -20;;
    ncu)
      for c in "1 32768 1" "32 131072 1" "32 131072 8"; do
        timeout $(lim 120) ncu --clock-control none --section SpeedOfLight --section Occupancy --section LaunchStats \
          --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis --section WarpStateStats \
          -k regex:"index_topk|attn_kernel" -c 2 "$BIN/msa_decode_bench" case $c
      done > "$R/ncu.txt" 2>&1;;
    pncusrc)  # full Nsight Compute set of the prefill attention (8K on 32K) with per-SASS-line stall samples
      timeout $(lim 150) ncu --clock-control none --set full --import-source no -k regex:"${PNCU_KERNEL:-pf_attn}" -c 1 \
        -o "$R/pf" "$BIN/msa_prefill_bench" case ${PNCU_CASE:-8192 40960} > "$R/pncusrc.log" 2>&1
      ncu -i "$R/pf.ncu-rep" --page details > "$R/pncu_details.txt" 2>&1
      ncu -i "$R/pf.ncu-rep" --page source --csv --print-source sass 2>/dev/null | gzip > "$R/pncu_source.csv.gz"
      rm -f "$R/pf.ncu-rep"; grep -E "pf_|Duration|Issued Ipc|Achieved Occ" "$R/pncu_details.txt" | head -8;;
    pncu)
      timeout $(lim 150) ncu --clock-control none --section SpeedOfLight --section Occupancy --section LaunchStats \
        --section ComputeWorkloadAnalysis --section WarpStateStats -k regex:"pf_" -c 12 \
        "$BIN/msa_prefill_bench" case ${PNCU_CASE:-8192 40960} > "$R/pncu.txt" 2>&1
      grep -E "pf_|Duration|DRAM Throughput|Compute \(SM\) Th|Achieved Occ|Issued Ipc" "$R/pncu.txt" | head -60;;
    memcheck|racecheck)
      timeout $(lim 60) $CS --tool $step "$BIN/msa_decode_test" --small > "$R/$step.log" 2>&1
      echo "rc=$?" >> "$R/$step.log"; tail -3 "$R/$step.log";;
    pmemcheck|pracecheck)
      if [ -x "$BIN/msa_prefill_test" ]; then
        timeout $(lim 200) $CS --tool ${step#p} "$BIN/msa_prefill_test" --small > "$R/$step.log" 2>&1
        echo "rc=$?" >> "$R/$step.log"; tail -3 "$R/$step.log"
      fi;;
  esac
done
echo "=== done at $(( $(date +%s) - START )) s" >> "$R/steps.log"
BASE=${BASELINE:-bench/results/cuda_prefill_2026-11-29_run3.json}
python3 bench/cuda/summarize_compare.py --prefill "$R/pbench.json" --decode "$R/bench.json" --torch "$R/torch.json" \
  --results "$R/compare.json" --date "$(date -u +%F)" --commit "$(cat "$R/commit.txt" 2>/dev/null)" \
  --baseline "$BASE" > "$R/summary.md" 2> "$R/summary.err"
{ # compact verdicts: tests, sanitizers, prefill kernel times under the profiler
  echo "## Verdicts (commit $(cut -c1-7 "$R/commit.txt" 2>/dev/null))"; echo
  for f in ptest test; do
    [ -f "$R/$f.log" ] && echo "- $f: $(grep -c 'PASS$' "$R/$f.log") PASS lines, $(grep -c FAIL "$R/$f.log") FAIL lines," \
      "$(grep -E '^ALL PASSED|rc=' "$R/$f.log" | tr '\n' ' ')"
  done
  [ -f "$R/ptest.log" ] && echo "- prefill max |out - cpu|: $(grep -o 'max |out - cpu| = [0-9.e-]*' "$R/ptest.log" | sort -t= -k2 -g | tail -1)"
  for f in pmemcheck pracecheck; do
    [ -f "$R/$f.log" ] && echo "- $f: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$R/$f.log" | tail -1)"
  done
  for alt in mma:"the mma.sync kernels" q8:"the Q8KV4 indexer and attention" q8i:"the Q8KV4 (FP8) indexer" \
             q8a:"the Q8KV4 attention" \
             alt:"the kernels of $(cat "$BIN/pf_alt_rev.txt" 2>/dev/null)" reg:"the per-pass register-A wgmma indexer"; do
    f="$R/pbench_${alt%%:*}.json"; [ -f "$f" ] && echo "- prefill ms with ${alt#*:}: $(python3 -c '
import json, sys
try:
    d = json.load(open(sys.argv[1]))
    print("; ".join("%s %.3f" % (c["case"], c["ms"]) for c in d["cases"]))
except Exception as e:
    print("unreadable:", e)' "$f")"
  done
  [ -f "$R/pbench2.json" ] && echo "- prefill ms with 2 queries per attention warp: $(python3 -c '
import json, sys
try:
    d = json.load(open(sys.argv[1]))
    print("; ".join("%s %.3f" % (c["case"], c["ms"]) for c in d["cases"]))
except Exception as e:
    print("unreadable:", e)' "$R/pbench2.json")"
  [ -f "$R/pncu2.txt" ] && echo "- ncu pf_attn, 2 queries per warp: $(grep -E 'Duration|L1/TEX Cache' "$R/pncu2.txt" | awk '{printf "%s %s %s; ", $1, $(NF-1), $NF}')"
  [ -f "$R/dsweep.md" ] && { echo "- decode option sweep (us per layer-step):"; echo; cat "$R/dsweep.md"; echo; }
  [ -f "$R/ncu.txt" ] && echo "- ncu decode (kernel, duration): $(awk '/index_topk_kernel|attn_kernel/{match($0,/(index_topk|attn)_kernel[^ (]*/); k=substr($0,RSTART,RLENGTH)} /  Duration/{printf "%s %s %s; ", k, $(NF), $(NF-1)}' "$R/ncu.txt" | head -c 900)"
  for f in memcheck racecheck; do
    [ -f "$R/$f.log" ] && echo "- decode $f: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$R/$f.log" | tail -1)"
  done
  [ -f "$R/pncu.txt" ] && echo "- ncu, case q_len kv_len = ${PNCU_CASE:-8192 40960} (kernel us): $(awk '/^  .*pf_[a-z_]*kernel/{match($0,/pf_[a-z_]*kernel/); k=substr($0,RSTART,RLENGTH)} /Duration/{printf "%s %s%s; ", k, $3, $2}' "$R/pncu.txt" | head -c 600)"
  echo
} >> "$R/summary.md"
cp "$R/summary.md" "$OUTD/summary.md"
tar czf "$OUTD/results.tgz" -C "$OUTD" r && rm -rf "$R"
cat "$OUTD/summary.md"
