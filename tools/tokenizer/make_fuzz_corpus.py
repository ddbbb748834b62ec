#!/usr/bin/python3
"""Writes the seed corpus of fuzz/fuzz_tokenizer.cpp into fuzz/corpus/fuzz_tokenizer/.

Each seed starts with the mode byte the target switches on: 0 text to encode, 1 token ids to decode, 2 a regex
pattern, 3 a tokenizer.json document. Texts come from tools/tokenizer/edge_cases.json, patterns are the
pre-tokenizer patterns of real tokenizer.json files (Qwen3, Llama 3, DeepSeek-V3, gpt-oss, GPT-2).

Usage: /usr/bin/python3 tools/tokenizer/make_fuzz_corpus.py
"""
import json
import os
import random

OUT = "fuzz/corpus/fuzz_tokenizer"
os.makedirs(OUT, exist_ok=True)
for name in os.listdir(OUT):
    os.remove(os.path.join(OUT, name))

def write(name, mode, payload):
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(bytes([mode]) + payload)

cases = json.load(open("tools/tokenizer/edge_cases.json", encoding="utf-8"))
for i, text in enumerate(cases[::5]):
    write(f"text_{i:02d}", 0, text.encode("utf-8"))
write("text_invalid_utf8", 0, b"ok \xff\xfe bad \xc3 \xe4\xbd truncated \xf0\x9f\x98")
write("text_surrogate", 0, b"\xed\xa0\x80 lone surrogate")

rng = random.Random(1234)
for i in range(6):
    write(f"ids_{i}", 1, bytes(rng.randrange(256) for _ in range(2 * rng.randrange(1, 40))))

patterns = [
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    r"\p{N}{1,3}",
    "[一-龥぀-ゟ゠-ヿ]+",
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+",
    r"(?m:^.+$)|\h+|\u00e9|\P{L}\p{^N}[\S\d\w]",
    r"a*",
]
for i, p in enumerate(patterns):
    write(f"pattern_{i}", 2, p.encode("utf-8"))

byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
mini = {
    "version": "1.0",
    "added_tokens": [{"id": 5, "content": "<s>", "single_word": False, "lstrip": False, "rstrip": False,
                      "normalized": False, "special": True}],
    "normalizer": {"type": "NFC"},
    "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": r"\p{N}{1,3}"}, "behavior": "Isolated", "invert": False}, byte_level]},
    "post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                                                {"Sequence": {"id": "A", "type_id": 0}}],
                       "special_tokens": {"<s>": {"id": "<s>", "ids": [5], "tokens": ["<s>"]}}},
    "decoder": byte_level,
    "model": {"type": "BPE", "unk_token": None, "vocab": {"a": 0, "b": 1, "ab": 2, "Ġ": 3, "Ġab": 4},
              "merges": [["a", "b"], ["Ġ", "ab"]]},
}
write("tokenizer_mini", 3, json.dumps(mini, ensure_ascii=False).encode("utf-8"))
mini["model"]["merges"] = ["a b", "Ġ ab"]
write("tokenizer_legacy_merges", 3, json.dumps(mini, ensure_ascii=False).encode("utf-8"))
write("tokenizer_broken", 3, b'{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a b c"]}}')
print(f"make_fuzz_corpus: {len(os.listdir(OUT))} seeds in {OUT}")
