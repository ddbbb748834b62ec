"""The default model's tokenizer (tools/train/bpe.py) against Hugging Face's own `tokenizers` (Rust, npm package in
tests/npm): the same ids for the whole held-out corpus and for awkward strings, and lossless round trips."""
import json
import os
import random
import shutil
import subprocess
import tempfile
import unicodedata
from collections import Counter

import pytest

from bpe import ByteLevelBPE

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
MODEL_TOKENIZER = os.path.join(ROOT, "models", "default", "tokenizer.json")
HELDOUT = os.path.join(ROOT, "tools", "train", "data", "corpus_heldout.jsonl")


def node_modules():
    for d in (os.path.join(ROOT, "tests", "npm", "node_modules"), "/work/main/tests/npm/node_modules"):
        if os.path.isdir(os.path.join(d, "tokenizers")):
            return d
    return None


def hf_encode(tokenizer_json: str, texts: list) -> dict:
    nm = node_modules()
    if nm is None or shutil.which("node") is None:
        pytest.skip("node and the npm `tokenizers` package are needed (scripts/setup.sh --test)")
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False, encoding="utf-8") as f:
        json.dump(texts, f)
        path = f.name
    try:
        out = subprocess.run(["node", os.path.join(HERE, "hf_tokenize.js"), tokenizer_json, path], check=True,
                             capture_output=True, env=dict(os.environ, NODE_PATH=nm)).stdout
    finally:
        os.unlink(path)
    return json.loads(out)


AWKWARD = [
    "", " ", "\n", "  \n\n\t x", "I'm HE'S they'LL we'd you've 'tis '", "a  b   c    \n   d",
    "3.14159 and 12,345,678 or 2026-11-29", "naïve café déjà vu — “quotes” ‘single’ … ©®",
    "e\u0301 (combining, NFC makes é)", "Ⅻ ½ ² ٣ (other numbers)", "日本語のテキスト、中文。", "Привет, мир!",
    "emoji 😀👩‍💻🇫🇷 zero\u200bwidth", "tabs\tand\x0bvertical\x0cfeed\r\nCRLF", "\x1c\x1d\x1e\x1f separators",
    "\u00a0no-break\u2003em\u3000ideographic", "]~!b[]~b]user\nHi[e~[\n]~b]ai\n<mm:think>\nok\n</mm:think>\n\n",
    "]<]minimax[>[<tool_call>\n]<]minimax[>[<invoke name=\"f\">]<]minimax[>[<a>1]<]minimax[>[</a>",
    "<mm:mask><mm:mask>[e~[ partial ]~b", "x" * 300, "!!!???...,,,;;;:::", "$$$ %%% ^^^ &&& *** @@@",
]


def random_strings(n: int, seed: int = 0) -> list:
    rng = random.Random(seed)
    pool = (list("abcdefghijklmnopqrstuvwxyzABCXYZ0123456789 \n\t.,;:'\"!?-_()[]{}<>~")
            + ["é", "ß", "λ", "Ж", "中", "😀", "\u0301", "\u00a0", "\r", "'s", "'LL", " the", "\n\n", "[e~[", "]~b]"])
    return ["".join(rng.choice(pool) for _ in range(rng.randint(0, 60))) for _ in range(n)]


@pytest.fixture(scope="module")
def tok():
    if not os.path.exists(MODEL_TOKENIZER):
        pytest.skip(f"{MODEL_TOKENIZER} is missing (tools/train/train_tokenizer.py writes it)")
    return ByteLevelBPE.from_hf_json(MODEL_TOKENIZER)


def check_same(tokenizer_json, tok, texts):
    ref = hf_encode(tokenizer_json, texts)
    assert ref["vocab_size"] == tok.vocab_size
    for t, ids, dec in zip(texts, ref["ids"], ref["decoded"]):
        ours = tok.encode(t)
        assert ours == ids, f"encode differs for {t[:80]!r}"
        assert tok.decode(ours) == dec == unicodedata.normalize("NFC", t)


def test_model_tokenizer_matches_hf_on_heldout_corpus(tok):
    if not os.path.exists(HELDOUT):
        pytest.skip(f"{HELDOUT} is missing (tools/train/build_corpus.py writes it)")
    with open(HELDOUT, encoding="utf-8") as f:
        texts = [json.loads(line)["text"] for line in f if line.strip()]
    assert len(texts) > 100
    check_same(MODEL_TOKENIZER, tok, texts)


def test_model_tokenizer_matches_hf_on_awkward_and_random_strings(tok):
    check_same(MODEL_TOKENIZER, tok, AWKWARD + random_strings(300))


def test_special_tokens_are_single_ids(tok):
    for content, tid, _ in tok.added:
        assert tok.encode(content) == [tid]
    assert tok.vocab_size == 4096


def test_trainer_on_small_text_matches_hf(tmp_path):
    """A freshly trained small tokenizer (other merges, other added ids) written and read back by HF."""
    text = ["the cat sat on the mat; the cats sat on the mats. " * 3, "I'll say it's 42, isn't it?\n\n  ok",
            "Émile's café – 12 naïve tokens"] * 5
    t = ByteLevelBPE.train(text, 40, [("<x>", True), ("<y>", False)])
    assert 0 < len(t.merges) <= 40
    # the first merge is the most frequent adjacent byte pair over the pre-tokenised words (counted here directly)
    pairs = Counter()
    for s in text:
        for w in t.pretokenize(s):
            pairs.update(zip(w, w[1:]))
    best = max(pairs.values())
    assert t.merges[0] == min(p for p, c in pairs.items() if c == best)
    path = str(tmp_path / "tokenizer.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(t.to_hf_json(), f, ensure_ascii=False)
    back = ByteLevelBPE.from_hf_json(path)
    assert back.merges == t.merges and back.vocab == t.vocab
    check_same(path, t, text + AWKWARD + ["<x>cat<y>"])
    assert len(t.encode(text[0])) < len(text[0].encode("utf-8"))  # merges compress
