#!/usr/bin/env bash
# Before/after comparison of two msa_cpu_bench binaries on a shared machine: runs them interleaved (before, after,
# before, after, ...) REPS times per thread count, by default timed by process CPU time, so that both versions see the
# same background load, and writes one JSON per version and thread count with every run's records (each tagged with
# "version", "repetition" and "note"), then prints the best and all values of the decode and attention figures.
#
#   bench/cpu_ab_bench.sh BEFORE_BIN AFTER_BIN LABEL [extra msa_cpu_bench arguments]
#
# Environment: THREADS="1 2" (thread counts), REPS=4, RESULTS_DIR=bench/results, MODEL_DIR=/tmp/msa_bench_models,
# BEFORE_COMMIT / AFTER_COMMIT (recorded as "commit"; default: unknown / the checkout's HEAD), NOTE (free text),
# TIMING=cputime (default) or wall (no --cpu-time: the figure that counts with several threads, but only on a quiet
# machine). Each run is `msa_cpu_bench [--cpu-time] --random-kv --quick` (GEMV kernels, MSA attention at 8K, tiny and
# mid decode); the JSON files are cpu_<date>_<LABEL>_<before|after>_t<threads>_<TIMING>.json.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ $# -lt 3 ]]; then
    sed -n "2,13p" "$0" >&2
    exit 2
fi
before=$1 after=$2 label=$3
shift 3
for bin in "$before" "$after"; do
    "$bin" --check >/dev/null 2>&1 || { echo "error: $bin does not run here" >&2; exit 1; }
done
results=${RESULTS_DIR:-bench/results}
reps=${REPS:-4}
date=$(date -u +%Y-%m-%d)
before_commit=${BEFORE_COMMIT:-unknown}
after_commit=${AFTER_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
timing=${TIMING:-cputime}
timing_args=()
[[ $timing == cputime ]] && timing_args=(--cpu-time)
note=${NOTE:-"interleaved before/after runs, ${timing_args[*]:-wall time} --random-kv --quick"}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$results"
for t in ${THREADS:-1 2}; do
    for r in $(seq 1 "$reps"); do
        for version in before after; do
            bin=$before commit=$before_commit
            [[ $version == after ]] && bin=$after commit=$after_commit
            echo "threads $t, repetition $r, $version ($bin), load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
            "$bin" --out "$tmp/${version}_t${t}_r${r}.json" --commit "$commit" --threads "$t" "${timing_args[@]}" --random-kv \
                --quick --model-dir "${MODEL_DIR:-/tmp/msa_bench_models}" "$@" >"$tmp/log" 2>&1 || { cat "$tmp/log" >&2; exit 1; }
        done
    done
done
/usr/bin/python3 - "$tmp" "$results" "$date" "$label" "$note" "$timing" ${THREADS:-1 2} <<'EOF'
import glob, json, os, sys
tmp, results, date, label, note, timing = sys.argv[1:7]
threads = sys.argv[7:]
shown = ["model_mid_decode", "model_tiny_decode", "attention_decode_msa_ctx8192", "reference_bandwidth", "read_bandwidth"]
for t in threads:
    for version in ("before", "after"):
        records = []
        for path in sorted(glob.glob(f"{tmp}/{version}_t{t}_r*.json")):
            rep = int(path.rsplit("_r", 1)[1].split(".")[0])
            for rec in json.load(open(path)):
                rec.update({"version": version, "repetition": rep, "note": note})
                records.append(rec)
        out = os.path.join(results, f"cpu_{date}_{label}_{version}_t{t}_{timing}.json")
        json.dump(records, open(out, "w"), indent=1)
        print(f"wrote {out}", file=sys.stderr)
        for fig in shown:
            rows = [r for r in records if r["figure"] == fig]
            if not rows:
                continue
            vals = [r["value"] for r in rows]
            best = min(vals) if rows[0]["unit"] == "us" else max(vals)
            extra = ""
            if fig == "model_mid_decode":
                fr = [r["fraction_of_bandwidth"] for r in rows]
                extra = f"  fraction of reference {min(fr):.2f}-{max(fr):.2f}"
            print(f"t{t} {version:6s} {fig:32s} best {best:9.2f} {rows[0]['unit']:9s} all " +
                  " ".join(f"{v:.2f}" for v in vals) + extra)
EOF
