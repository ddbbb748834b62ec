#!/usr/bin/python3
"""Writes the small tokenizer.json files of the tokenizer tests: a tiny but genuine byte-level BPE (also used by the
tokenizer fuzz target), and three hand-made character-level BPE models that exercise model options the real
vocabularies do not use (unk_token with fuse_unk, byte_fallback, continuing_subword_prefix/end_of_word_suffix).

The byte-level one learns 400 merges from a fixed English + multilingual training text (the first 3000 lines of the KJV Bible from
Debian's bible-kjv, plus a few lines of other scripts), with the usual BPE rule: repeatedly merge the most frequent
adjacent pair of symbols (ties broken by the pair's text, so the result is deterministic). The file has the layout of
a GPT-2 style Hugging Face tokenizer.json: ByteLevel pre-tokenizer (use_regex, no prefix space), ByteLevel decoder and
post-processor, merges in the legacy "a b" string format, and four added tokens (three special).

Usage: /usr/bin/python3 tools/tokenizer/make_tiny_tokenizer.py [output directory]
       (default tests/tokenizer/data; needs `bible` from Debian bible-kjv)
"""
import collections
import json
import re
import subprocess
import sys

NUM_MERGES = 400
OUT_DIR = sys.argv[1] if len(sys.argv) > 1 else "tests/tokenizer/data"


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
    write("tiny_tokenizer.json", tokenizer)
    print(f"make_tiny_tokenizer: {len(vocab)} vocabulary entries, {len(merges)} merges")
    make_char_bpe_tokenizers()


def write(name, tokenizer):
    path = f"{OUT_DIR}/{name}"
    with open(path, "w", encoding="utf-8") as f:
        json.dump(tokenizer, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"make_tiny_tokenizer: wrote {path}")


def char_bpe(vocab, merges, **options):
    """A tokenizer.json around a character-level BPE model (no normalizer, decoder or added tokens)."""
    model = {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
             "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "vocab": vocab, "merges": merges}
    model.update(options)
    return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": None,
            "pre_tokenizer": None, "post_processor": None, "decoder": None, "model": model}


def with_merges(vocab, pairs, prefix=""):
    """Adds each merge's result to the vocabulary (the right part loses the continuing prefix, as in Hugging Face)."""
    for a, b in pairs:
        vocab.setdefault(a + b[len(prefix):], len(vocab))
    return vocab


def make_char_bpe_tokenizers():
    printable = [chr(c) for c in range(0x20, 0x7F)]
    common = [("t", "h"), ("th", "e"), ("i", "n"), ("a", "n"), ("e", "r"), ("o", "n"), ("an", "d"), ("in", "g"),
              ("r", "e"), ("e", "s")]

    # Printable ASCII characters plus a fused <unk> for everything else.
    vocab = with_merges({c: i for i, c in enumerate(printable)}, common)
    vocab["<unk>"] = len(vocab)
    unk = char_bpe(vocab, [list(p) for p in common], fuse_unk=True)
    unk["pre_tokenizer"] = {"type": "WhitespaceSplit"}
    write("char_bpe_unk.json", unk)

    # No uppercase letters, but byte tokens <0x00>..<0x7F>: uppercase falls back to bytes, non-ASCII to <unk>.
    vocab = {c: i for i, c in enumerate(c for c in printable if not c.isupper())}
    for b in range(0x80):
        vocab[f"<0x{b:02X}>"] = len(vocab)
    vocab["<unk>"] = len(vocab)
    with_merges(vocab, common[:5])
    fallback = char_bpe(vocab, [list(p) for p in common[:5]], byte_fallback=True)
    fallback["pre_tokenizer"] = {"type": "Whitespace"}
    write("char_bpe_byte_fallback.json", fallback)

    # Word-piece style symbols: "##" before non-initial characters, "</w>" after the last; legacy merges.
    vocab = {}
    for c in (chr(c) for c in range(ord("a"), ord("z") + 1)):
        for form in (c, "##" + c, c + "</w>", "##" + c + "</w>"):
            vocab[form] = len(vocab)
    vocab["<unk>"] = len(vocab)
    pairs = [("t", "##h"), ("th", "##e</w>"), ("a", "##n"), ("an", "##d</w>"), ("i", "##n"), ("in", "##g</w>"),
             ("o", "##f</w>")]
    with_merges(vocab, pairs, prefix="##")
    affixes = char_bpe(vocab, [f"{a} {b}" for a, b in pairs], continuing_subword_prefix="##", end_of_word_suffix="</w>")
    affixes["normalizer"] = {"type": "Lowercase"}
    affixes["pre_tokenizer"] = {"type": "BertPreTokenizer"}
    write("char_bpe_affixes.json", affixes)


if __name__ == "__main__":
    main()
