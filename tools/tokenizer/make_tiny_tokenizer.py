#!/usr/bin/python3
"""Writes a tiny but genuine byte-level BPE tokenizer.json for tests and the tokenizer fuzz target.

It learns 400 merges from a fixed English + multilingual training text (the first 3000 lines of the KJV Bible from
Debian's bible-kjv, plus a few lines of other scripts), with the usual BPE rule: repeatedly merge the most frequent
adjacent pair of symbols (ties broken by the pair's text, so the result is deterministic). The file has the layout of
a GPT-2 style Hugging Face tokenizer.json: ByteLevel pre-tokenizer (use_regex, no prefix space), ByteLevel decoder and
post-processor, merges in the legacy "a b" string format, and four added tokens (three special).

Usage: /usr/bin/python3 tools/tokenizer/make_tiny_tokenizer.py [output path]
       (default tests/tokenizer/data/tiny_tokenizer.json; needs `bible` from Debian bible-kjv)
"""
import collections
import json
import re
import subprocess
import sys

NUM_MERGES = 400
OUT = sys.argv[1] if len(sys.argv) > 1 else "tests/tokenizer/data/tiny_tokenizer.json"


def byte_alphabet():
    """GPT-2's byte -> printable character table."""
    keep = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(0x100 + extra)
            extra += 1
    return table


def training_text():
    kjv = subprocess.run(["bible", "-p", "/usr/lib", "Gen1:1-Rev22:21"], check=True, capture_output=True,
                         text=True).stdout.split("\n")[:3000]
    others = [
        "Der schnelle braune Fuchs springt über den faulen Hund.",
        "Быстрая коричневая лиса прыгает через ленивую собаку.",
        "敏捷的棕色狐狸跳过了懒狗。 你好，世界！",
        "def tokenize(text):\n    return [t for t in text.split() if t]\n",
        "1234567890 3.14159 2024-01-31 😀 🦙",
    ] * 20
    return "\n".join(kjv + others)


def main():
    alphabet = byte_alphabet()
    # A coarse split into words (the runtime ByteLevel regex decides the real pieces; this only shapes the merges).
    words = re.findall(r" ?[^\W\d_]+| ?\d+| ?[^\s\w]+|\s+", training_text())
    counts = collections.Counter(tuple(alphabet[b] for b in w.encode("utf-8")) for w in words)

    vocab = {alphabet[b]: b for b in range(256)}
    merges = []
    for _ in range(NUM_MERGES):
        pairs = collections.Counter()
        for word, n in counts.items():
            for a, b in zip(word, word[1:]):
                pairs[(a, b)] += n
        if not pairs:
            break
        best_count = max(pairs.values())
        best = min(p for p, n in pairs.items() if n == best_count)
        merges.append(best)
        merged = best[0] + best[1]
        vocab.setdefault(merged, len(vocab))
        new_counts = collections.Counter()
        for word, n in counts.items():
            out, i = [], 0
            while i < len(word):
                if i + 1 < len(word) and (word[i], word[i + 1]) == best:
                    out.append(merged)
                    i += 2
                else:
                    out.append(word[i])
                    i += 1
            new_counts[tuple(out)] += n
        counts = new_counts

    added = [("<|endoftext|>", True), ("<|im_start|>", True), ("<|im_end|>", True), ("<think>", False)]
    added_tokens = []
    for content, special in added:
        added_tokens.append({"id": len(vocab) + len(added_tokens), "content": content, "single_word": False,
                             "lstrip": False, "rstrip": False, "normalized": not special, "special": special})
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    tokenizer = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added_tokens,
        "normalizer": None,
        "pre_tokenizer": byte_level,
        "post_processor": dict(byte_level, trim_offsets=False),
        "decoder": byte_level,
        "model": {
            "type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
            "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
            "vocab": vocab,
            "merges": [f"{a} {b}" for a, b in merges],
        },
    }
    with open(OUT, "w", encoding="utf-8") as f:
        json.dump(tokenizer, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"make_tiny_tokenizer: {len(vocab)} vocabulary entries, {len(merges)} merges -> {OUT}")


if __name__ == "__main__":
    main()
