#!/usr/bin/env python3
"""Tokenizes the corpus for training (CPU, here; the GPU machine only reads the results).

  train.bin    uint16 token ids: every training document followed by the end token [e~[, documents shuffled with a
               fixed seed, plus chat-formatted examples made from training documents only (rendered with the
               model's own chat template, so that `msa chat` gets answers in the right format)
  heldout.bin  uint16 token ids of the held-out documents (each followed by [e~[), in corpus order
  data.json    counts, the tokenizer's sha256, and what the chat examples are

Chat examples (about a fifth of the tokens): "recite a passage" from a training Bible chapter and "tell me a
fortune" from a training fortune, each with a short reasoning block (<mm:think>) or with thinking disabled.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from bpe import ByteLevelBPE  # noqa: E402
from train_tokenizer import EOS  # noqa: E402

SEED = 1234
SYSTEMS = [None, "You are a helpful assistant.", "You answer in the words of the King James Bible.",
           "You are a fortune cookie."]
FORTUNE_ASKS = ["Tell me a fortune.", "Give me a fortune cookie.", "Say something wise.", "Tell me a {topic} quote.",
                "Do you know a saying about {topic}?", "Share a {topic} fortune."]
VERSE_ASKS = ["Recite {ref}.", "What does {ref} say?", "Read me {ref} from the King James Bible.", "Quote {ref}.",
              "Please give me {ref}."]


def read_docs(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def chat_examples(docs, rng):
    """[(messages, thinking_mode)] from training documents."""
    out = []
    for d in docs:
        src, group = d["group"].split("/", 1)
        if src == "kjv":
            for ch in re.split(r"\n\n(?=\S.* \d+\n)", d["text"]):
                head, _, body = ch.partition("\n")
                verses = [v for v in body.split("\n") if v]
                if not verses:
                    continue
                a = rng.randrange(len(verses))
                b = min(len(verses), a + rng.randint(1, 6))
                num = lambda v: v.split(" ", 1)[0]  # noqa: E731
                ref = f"{head}:{num(verses[a])}" + (f"-{num(verses[b - 1])}" if b - a > 1 else "")
                ask = rng.choice(VERSE_ASKS).format(ref=ref)
                answer = "\n".join(verses[a:b])
                think = f"The user asks for {ref} from the King James Bible. I will quote it verse by verse."
                out.append((ask, think, answer))
        elif src == "fortunes" and rng.random() < 0.35:
            ask = rng.choice(FORTUNE_ASKS).format(topic=group.replace("-", " and "))
            think = f"A fortune from the {group} collection fits this request."
            out.append((ask, think, d["text"].rstrip("\n")))
    rendered = []
    for ask, think, answer in out:
        sys_prompt = rng.choice(SYSTEMS)
        msgs = ([{"role": "system", "content": sys_prompt}] if sys_prompt else []) + [{"role": "user", "content": ask}]
        rendered.append((msgs, think if rng.random() < 0.7 else None, answer))
    return rendered


def render_chat(template, msgs, think, answer):
    """The training text of one exchange: the prompt exactly as the server renders it (thinking enabled or
    disabled), then the assistant's reasoning and answer and the end token."""
    if think is not None:
        prompt = template.render(messages=msgs, add_generation_prompt=True, thinking_mode="enabled", tools=None,
                                 bos_token="]~!b[")
        return prompt + think + "\n</mm:think>\n\n" + answer + EOS + "\n"
    prompt = template.render(messages=msgs, add_generation_prompt=True, thinking_mode="disabled", tools=None,
                             bos_token="]~!b[")
    return prompt + answer + EOS + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=os.path.join(HERE, "data"))
    ap.add_argument("--model", default=os.path.join(ROOT, "models", "default"))
    args = ap.parse_args()
    import jinja2

    tok_path = os.path.join(args.model, "tokenizer.json")
    tok = ByteLevelBPE.from_hf_json(tok_path)
    with open(os.path.join(args.model, "tokenizer_config.json"), encoding="utf-8") as f:
        template = jinja2.Environment().from_string(json.load(f)["chat_template"])
    eos = tok.added_ids[EOS]
    rng = random.Random(SEED)
    train_docs = read_docs(os.path.join(args.data, "corpus_train.jsonl"))
    held_docs = read_docs(os.path.join(args.data, "corpus_heldout.jsonl"))

    chats = chat_examples(train_docs, rng)
    pieces = [tok.encode(d["text"]) + [eos] for d in train_docs]
    n_doc_tokens = sum(len(p) for p in pieces)
    chat_pieces = [tok.encode(render_chat(template, m, t, a)) for m, t, a in chats]
    pieces += chat_pieces
    rng.shuffle(pieces)
    train = np.array([t for p in pieces for t in p], dtype=np.uint16)
    held = np.array([t for d in held_docs for t in tok.encode(d["text"]) + [eos]], dtype=np.uint16)
    train.tofile(os.path.join(args.data, "train.bin"))
    held.tofile(os.path.join(args.data, "heldout.bin"))
    with open(tok_path, "rb") as f:
        tok_sha = hashlib.sha256(f.read()).hexdigest()
    info = {"tokenizer_sha256": tok_sha, "vocab_size": tok.vocab_size, "eos_id": eos, "seed": SEED,
            "train_tokens": int(train.size), "train_document_tokens": n_doc_tokens,
            "train_chat_examples": len(chat_pieces), "train_chat_tokens": sum(len(p) for p in chat_pieces),
            "heldout_tokens": int(held.size), "heldout_documents": len(held_docs),
            "heldout_chars": sum(len(d["text"]) for d in held_docs)}
    with open(os.path.join(args.data, "data.json"), "w") as f:
        json.dump(info, f, indent=1)
    print(json.dumps(info))
    print("example chat:", repr(render_chat(template, *chats[0])[:400]))


if __name__ == "__main__":
    main()
