#!/usr/bin/env python3
"""Tokenizes the corpus for training (CPU, here; the GPU machine only reads the results).

  train.bin    uint16 token ids: every training document followed by the end token [e~[, documents shuffled with a
               fixed seed, plus chat-formatted examples made from training documents only (rendered with the
               model's own chat template, so that `msa chat` gets answers in the right format)
  heldout.bin  uint16 token ids of the held-out documents (each followed by [e~[), in corpus order
  data.json    counts, the tokenizer's sha256, and what the chat examples are

Training documents: every training document except the digit-heavy fortunes (digit_heavy(): more than 2% digits
or a run of 5 digits; about 950 of 14,400 fortunes), which taught the model to drift into digit strings. The
held-out text is not filtered (heldout.bin is the same as before this filter).

Chat examples (about 40% of the tokens), rendered with the model's chat template, each with a short reasoning block
(<mm:think>, 70%) or with thinking disabled, under one of a few system prompts or none. From every training Bible
chapter, twice (different random picks): recite a verse ("Recite John 3:16." -> the verse), recite a passage of 2-5
verses (numbered lines), continue a verse from its first third to two thirds ("Continue: ..." -> the rest), and a
theme question ("What does the book of X say about Y?" -> "Book C:V says:" and the verse window that contains the
theme word Y, from a fixed list of themes); plus "tell me a fortune" for 30% of the kept training fortunes.
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
              "Please give me {ref}.", "{ref}"]
CONTINUE_ASKS = ["Continue: {start}", "Finish this verse: {start}", "Complete the verse: \"{start} ...\"",
                 "How does this verse go on? {start}", "{start}"]
TOPIC_ASKS = ["What does the book of {book} say about {topic}?", "What does the Bible say about {topic}?",
              "Give me a verse about {topic}.", "What does {book} say about {topic}?",
              "Is there a verse about {topic} in {book}?", "Tell me what the scripture says about {topic}."]
# themes a user may ask about; a topic question is made from a training verse that contains one of these words
THEMES = ("love", "faith", "hope", "wisdom", "fear", "peace", "mercy", "sin", "grace", "truth", "light", "darkness",
          "death", "life", "joy", "prayer", "heart", "water", "bread", "wine", "king", "war", "silver", "gold",
          "children", "father", "mother", "wife", "brother", "heaven", "earth", "sea", "fire", "spirit", "soul",
          "righteousness", "judgment", "glory", "praise", "law", "kingdom", "blood", "strength", "pride", "anger",
          "salvation", "covenant", "sheep", "shepherd", "servant", "riches", "poor", "wicked", "righteous",
          "kindness", "comfort", "sword", "temple", "angel", "prophet", "river", "mountain", "rain", "sun", "stars",
          "famine", "fruit", "tree", "seed", "harvest", "heal", "tears", "rest", "strangers", "widow", "justice",
          "knowledge", "understanding", "word", "honour", "trust", "forgive", "repent", "worship", "song", "night")
# fortunes that are mostly numbers (message ids, "lucky numbers", bignum listings, perl one-liners) teach a small
# model to fall into digit strings: they stay out of the training data (held-out text is unchanged)
LONG_NUMBER = re.compile(r"\d{5,}")


def digit_heavy(text: str) -> bool:
    return sum(c.isdigit() for c in text) > 0.02 * len(text) or LONG_NUMBER.search(text) is not None


def read_docs(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def kjv_chapters(text):
    """[(book, chapter, [(verse number, verse text)])] of one book's document ("Book N" headers, "N text" lines)."""
    out = []
    for ch in re.split(r"\n\n(?=\S.* \d+\n)", text):
        head, _, body = ch.partition("\n")
        book, _, num = head.rpartition(" ")
        verses = [tuple(v.split(" ", 1)) for v in body.split("\n") if v]
        if verses:
            out.append((book, num, verses))
    return out


def kjv_chat(book, chap, verses, rng):
    """(ask, reasoning, answer) exchanges about one training chapter: recite a verse, recite a passage, continue a
    verse, a verse about a theme."""
    ref = lambda a, b=None: f"{book} {chap}:{verses[a][0]}" + (f"-{verses[b][0]}" if b is not None and b > a else "")  # noqa: E731
    numbered = lambda a, b: "\n".join(f"{n} {t}" for n, t in verses[a:b])  # noqa: E731
    out = []
    a = rng.randrange(len(verses))  # one verse
    out.append((rng.choice(VERSE_ASKS).format(ref=ref(a)),
                f"The user asks for {ref(a)} from the King James Bible. I will quote the verse.", verses[a][1]))
    a = rng.randrange(len(verses))  # a passage
    b = min(len(verses), a + rng.randint(2, 5))
    out.append((rng.choice(VERSE_ASKS).format(ref=ref(a, b - 1)),
                f"The user asks for {ref(a, b - 1)} from the King James Bible. I will quote it verse by verse.",
                numbered(a, b)))
    long_verses = [i for i, (_, t) in enumerate(verses) if len(t.split()) >= 8]
    if long_verses:  # continue a verse from its first half
        a = rng.choice(long_verses)
        words = verses[a][1].split()
        cut = rng.randint(len(words) // 3, (2 * len(words)) // 3)
        out.append((rng.choice(CONTINUE_ASKS).format(start=" ".join(words[:cut])),
                    f"These are the first words of {ref(a)}. I will finish the verse.", " ".join(words[cut:])))
    themed = [(i, w) for i, (_, t) in enumerate(verses)
              for w in sorted(set(re.findall(r"[a-z]+", t.lower())) & set(THEMES))]
    if themed:  # a theme: the verse that speaks of it and the next one or two
        a, topic = rng.choice(themed)
        b = min(len(verses), a + rng.randint(1, 3))
        answer = f"{ref(a, b - 1)} says:\n" + (verses[a][1] if b - a == 1 else numbered(a, b))
        out.append((rng.choice(TOPIC_ASKS).format(book=book, topic=topic),
                    f"The user asks about {topic}. {ref(a, b - 1)} speaks of {topic}; I will quote it.", answer))
    return out


def chat_examples(docs, rng, kjv_rounds=2, fortune_rate=0.3):
    """[(messages, reasoning or None, answer)] from training documents: kjv_rounds rounds of kjv_chat over every
    training chapter, and a fortune request for a fortune_rate share of the (non digit-heavy) training fortunes."""
    out = []
    for d in docs:
        src, group = d["group"].split("/", 1)
        if src == "kjv":
            for book, chap, verses in kjv_chapters(d["text"]):
                for _ in range(kjv_rounds):
                    out += kjv_chat(book, chap, verses, rng)
        elif src == "fortunes" and not digit_heavy(d["text"]) and rng.random() < fortune_rate:
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
    kept = [d for d in train_docs if not (d["group"].startswith("fortunes/") and digit_heavy(d["text"]))]
    pieces = [tok.encode(d["text"]) + [eos] for d in kept]
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
            "train_documents": len(kept), "dropped_digit_heavy_fortunes": len(train_docs) - len(kept),
            "train_chat_examples": len(chat_pieces), "train_chat_tokens": sum(len(p) for p in chat_pieces),
            "heldout_tokens": int(held.size), "heldout_documents": len(held_docs),
            "heldout_chars": sum(len(d["text"]) for d in held_docs)}
    with open(os.path.join(args.data, "data.json"), "w") as f:
        json.dump(info, f, indent=1)
    print(json.dumps(info))
    for i in range(0, 8):
        print("example chat:", repr(render_chat(template, *chats[i])[-300:]))


if __name__ == "__main__":
    main()
