#!/usr/bin/env bash
# Builds the multilingual tokenizer test corpus, tests/tokenizer/data/corpus.jsonl, from Debian packages:
#   bible-kjv (KJV Bible), fortunes + fortunes-zh + fortunes-ru, unicode-data (emoji-test.txt,
#   NormalizationTest.txt, DerivedAge.txt), plus the hand-written edge cases in tools/tokenizer/edge_cases.json.
# Sampling is deterministic (every n-th item), so the output only changes when the packages or this script do.
# Each output line is {"source": "...", "text": "..."}. Install the packages with `scripts/setup.sh --test`.
#
# Usage: tools/tokenizer/build_corpus.sh [output.jsonl]
set -euo pipefail
cd "$(dirname "$0")/../.."
out="${1:-tests/tokenizer/data/corpus.jsonl}"

for f in /usr/bin/bible /usr/share/games/fortunes/cookie /usr/share/games/fortunes/chinese \
         /usr/share/games/fortunes/ru /usr/share/unicode/emoji/emoji-test.txt \
         /usr/share/unicode/NormalizationTest.txt.bz2 /usr/share/unicode/DerivedAge.txt; do
  [[ -e "$f" ]] || { echo "build_corpus: $f is missing; run scripts/setup.sh --test" >&2; exit 1; }
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bible -p /usr/lib 'Gen1:1-Rev22:21' > "$tmp/kjv.txt"

mkdir -p "$(dirname "$out")"
/usr/bin/python3 - "$tmp/kjv.txt" "$out" <<'PY'
import bz2, glob, json, os, sys

kjv_path, out_path = sys.argv[1], sys.argv[2]
entries = []

def add(source, text):
    entries.append({"source": source, "text": text})

def every(items, step, offset=0):
    return items[offset::step]

def fortunes(path):
    """The fortunes of one fortune file (separated by lines holding a single %)."""
    data = open(path, "rb").read().decode("utf-8")
    parts, current = [], []
    for line in data.split("\n"):
        if line == "%":
            parts.append("\n".join(current))
            current = []
        else:
            current.append(line)
    if current:
        parts.append("\n".join(current))
    return [p for p in parts if p.strip()]

# KJV: one line in 100 (verse lines keep their leading numbers and indentation).
kjv = open(kjv_path, encoding="utf-8").read().split("\n")
for line in every(kjv, 100, 7):
    add("kjv", line)

# English fortunes: one fortune in 30 of every file, in file-name order.
fortune_dir = "/usr/share/games/fortunes"
skip = {"chinese", "tang300", "song100"}
for path in sorted(glob.glob(fortune_dir + "/*")):
    name = os.path.basename(path)
    if os.path.isdir(path) or "." in name or name in skip:
        continue
    for text in every(fortunes(path), 30, 3):
        add("fortunes-en/" + name, text)

# Chinese fortunes (with ANSI colour escapes), Tang and Song poems.
for name, step in (("chinese", 40), ("tang300", 12), ("song100", 8)):
    for text in every(fortunes(os.path.join(fortune_dir, name)), step, 1):
        add("fortunes-zh/" + name, text)

# Russian fortunes.
for path in sorted(glob.glob(fortune_dir + "/ru/*")):
    name = os.path.basename(path)
    if name.endswith(".dat") or name.endswith(".u8"):
        continue
    for text in every(fortunes(path), 150, 5):
        add("fortunes-ru/" + name, text)

# Emoji sequences: one data line in 9 of emoji-test.txt, as written (code points, status, emoji, name).
emoji_lines = [l for l in open("/usr/share/unicode/emoji/emoji-test.txt", encoding="utf-8").read().split("\n")
               if l and not l.startswith("#")]
for line in every(emoji_lines, 9, 2):
    add("emoji-test", line)

# NormalizationTest: one line in 20; the five columns as text, separated by spaces.
norm_lines = []
for line in bz2.open("/usr/share/unicode/NormalizationTest.txt.bz2", "rt", encoding="utf-8"):
    line = line.rstrip("\n")
    if not line or line.startswith("#") or line.startswith("@"):
        continue
    columns = line.split(";")[:5]
    norm_lines.append(" ".join("".join(chr(int(h, 16)) for h in c.split()) for c in columns))
for text in every(norm_lines, 20, 0):
    add("normalization-test", text)

# Code point sweep over planes 0-3 and 14: every 29th scalar value, 32 per line, a space after every 8.
def sweep_lines(code_points, per_line=32):
    for i in range(0, len(code_points), per_line):
        chunk = code_points[i:i + per_line]
        yield " ".join("".join(chr(c) for c in chunk[j:j + 8]) for j in range(0, len(chunk), 8))

sweep = [c for c in list(range(0x80, 0x34000, 29)) + list(range(0xE0000, 0xE0200, 29))
         if not 0xD800 <= c <= 0xDFFF]
for text in sweep_lines(sweep):
    add("unicode-sweep", text)

# Characters new in Unicode 15.0 (newer than PCRE2's tables): every 4th, from DerivedAge.txt.
new15 = []
for line in open("/usr/share/unicode/DerivedAge.txt", encoding="utf-8"):
    body = line.split("#")[0].strip()
    if not body or body.split(";")[1].strip() != "15.0":
        continue
    r = body.split(";")[0].strip()
    lo, hi = (r.split("..") + [r])[:2] if ".." in r else (r, r)
    new15.extend(range(int(lo, 16), int(hi, 16) + 1))
for text in sweep_lines(new15[::4]):
    add("unicode-15.0", text)

# Hand-written edge cases.
for text in json.load(open("tools/tokenizer/edge_cases.json", encoding="utf-8")):
    add("edge-case", text)

with open(out_path, "w", encoding="utf-8") as f:
    for e in entries:
        f.write(json.dumps(e, ensure_ascii=False) + "\n")
sources = {}
for e in entries:
    key = e["source"].split("/")[0]
    sources[key] = sources.get(key, 0) + 1
print(f"build_corpus: {len(entries)} texts, {os.path.getsize(out_path)} bytes -> {out_path}")
print("build_corpus: " + ", ".join(f"{k} {v}" for k, v in sources.items()))
PY
