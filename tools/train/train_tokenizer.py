#!/usr/bin/env python3
"""Trains the default model's byte-level BPE tokenizer on the training split of the corpus (build_corpus.py) and
writes the Hugging Face files into the model directory:
  tokenizer.json           BPE (merges as [left, right] pairs), NFC, Split regex + ByteLevel, ByteLevel decoder
  tokenizer_config.json    bos/eos, the chat template (tools/chat/templates/minimax_m3.jinja), added tokens
  special_tokens_map.json
Vocabulary: 256 bytes + merges + the special tokens below = --vocab-size (default 4096).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bpe import ByteLevelBPE  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

BOS, ROLE, EOS = "]~!b[", "]~b]", "[e~["
THINK_OPEN, THINK_CLOSE = "<mm:think>", "</mm:think>"
TOOL_NS = "]<]minimax[>["
MASK = "<mm:mask>"  # the DSpark drafter's mask token
# (content, special): special tokens are dropped by decode(skip_special_tokens=True); the reasoning markers and the
# tool-call namespace token are text the server's parsers must see, so they are not special (as in MiniMax's).
ADDED_TOKENS = [(BOS, True), (ROLE, True), (EOS, True), (THINK_OPEN, False), (THINK_CLOSE, False), (TOOL_NS, False),
                (MASK, True)]
CHAT_TEMPLATE = os.path.join(ROOT, "tools", "chat", "templates", "minimax_m3.jinja")


def read_texts(path: str) -> list:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line)["text"] for line in f if line.strip()]


def write_tokenizer_files(tok: ByteLevelBPE, out: str, template_path: str, max_len: int):
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tok.to_hf_json(), f, ensure_ascii=False, indent=1)
        f.write("\n")
    with open(template_path, encoding="utf-8") as f:
        template = f.read()
    cfg = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": BOS, "eos_token": EOS, "pad_token": EOS, "unk_token": None,
        "add_bos_token": False, "add_eos_token": False, "clean_up_tokenization_spaces": False,
        "model_max_length": max_len,
        "added_tokens_decoder": {str(tid): {"content": c, "lstrip": False, "normalized": False, "rstrip": False,
                                            "single_word": False, "special": s} for c, tid, s in tok.added},
        "additional_special_tokens": [c for c, _, s in tok.added if s and c not in (BOS, EOS)],
        "chat_template": template,
    }
    with open(os.path.join(out, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(cfg, f, ensure_ascii=False, indent=1)
        f.write("\n")
    with open(os.path.join(out, "special_tokens_map.json"), "w", encoding="utf-8") as f:
        json.dump({"bos_token": BOS, "eos_token": EOS, "pad_token": EOS,
                   "additional_special_tokens": cfg["additional_special_tokens"]}, f, indent=1)
        f.write("\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", default=os.path.join(HERE, "data", "corpus_train.jsonl"))
    ap.add_argument("--out", default=os.path.join(ROOT, "models", "default"))
    ap.add_argument("--vocab-size", type=int, default=4096)
    ap.add_argument("--chat-template", default=CHAT_TEMPLATE)
    ap.add_argument("--max-length", type=int, default=8192, help="model_max_length written to tokenizer_config.json")
    args = ap.parse_args()
    if not os.path.exists(args.corpus):
        sys.exit(f"train_tokenizer: {args.corpus} is missing: run tools/train/build_corpus.py first")
    if not os.path.exists(args.chat_template):
        sys.exit(f"train_tokenizer: chat template {args.chat_template} is missing")
    t0 = time.time()
    texts = read_texts(args.corpus)
    n_merges = args.vocab_size - 256 - len(ADDED_TOKENS)
    tok = ByteLevelBPE.train(texts, n_merges, ADDED_TOKENS, log=print)
    if tok.vocab_size != args.vocab_size:
        sys.exit(f"train_tokenizer: only {len(tok.merges)} merges were found; vocabulary {tok.vocab_size}")
    write_tokenizer_files(tok, args.out, args.chat_template, args.max_length)
    print(f"tokenizer: {tok.vocab_size} tokens ({len(tok.merges)} merges) in {time.time() - t0:.1f} s -> {args.out}")


if __name__ == "__main__":
    main()
