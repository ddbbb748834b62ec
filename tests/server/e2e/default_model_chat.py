#!/usr/bin/python3
"""Issue 6's acceptance as a test: the shipped default model (models/default), served by `msa serve` with the MiniMax
parsers (run_with_server.py), answers chat requests with KJV-style English.

"KJV-style" is checked as properties that do not depend on the model's exact words, over greedy answers to a few
requests: each answer is mostly letters, has no long digit runs and uses a word of the King James lexicon (archaic
forms and names that ordinary modern English and the fortune/jargon parts of the corpus rarely use), and the answers
together use at least five different ones.
"""
import json
import os
import re
import sys
import urllib.request

BASE = os.environ["MSA_BASE_URL"]
KEY = os.environ["MSA_API_KEY"]
MODEL = os.environ["MSA_MODEL"]
KJV_WORDS = {"unto", "thee", "thou", "thy", "thine", "hath", "hast", "saith", "ye", "shalt", "doth", "behold",
             "lord", "god", "israel", "jesus", "verily", "wherefore", "shall", "thereof", "begat", "forth", "upon",
             "saying", "hosts", "altar", "judah", "jerusalem"}
PROMPTS = ["Recite a verse about the LORD.", "Recite Psalms 23:1.", "Give me a verse about love.",
           "Continue: And God said,"]


def chat(prompt: str) -> dict:
    body = {"model": MODEL, "messages": [{"role": "user", "content": prompt}], "temperature": 0, "max_tokens": 64,
            "chat_template_kwargs": {"thinking_mode": "disabled"}}
    req = urllib.request.Request(BASE + "/v1/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json", "Authorization": f"Bearer {KEY}"})
    with urllib.request.urlopen(req, timeout=120) as r:
        assert r.status == 200, r.status
        return json.load(r)


def main() -> int:
    failures, seen = [], set()
    for prompt in PROMPTS:
        answer = chat(prompt)["choices"][0]["message"]["content"] or ""
        words = re.findall(r"[A-Za-z]+", answer)
        visible = [ch for ch in answer if not ch.isspace()]
        letters = sum(ch.isalpha() for ch in visible)
        hits = sorted({w.lower() for w in words} & KJV_WORDS)
        seen.update(hits)
        print(f"{prompt!r} -> {answer!r}\n  KJV words: {hits}")
        if len(words) < 5:
            failures.append(f"{prompt!r}: fewer than 5 words")
        elif letters < 0.8 * len(visible):
            failures.append(f"{prompt!r}: only {letters} of {len(visible)} visible characters are letters")
        if re.search(r"\d{5}", answer):
            failures.append(f"{prompt!r}: a run of 5 digits")
        if not hits:
            failures.append(f"{prompt!r}: no KJV word")
    if len(seen) < 5:
        failures.append(f"the answers use only {len(seen)} different KJV words: {sorted(seen)}")
    for f in failures:
        print("FAILED:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
