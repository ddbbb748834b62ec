"""Byte-level BPE: the default model's tokenizer, written from the algorithm (GPT-2-style byte alphabet, a Split
pre-tokenizer regex of the Qwen2 / Llama-3 kind, merges applied by rank).

`ByteLevelBPE` trains merges from text, encodes and decodes, and writes / reads the Hugging Face `tokenizer.json`
layout (model BPE with merges as [left, right] pairs, NFC normalizer, Sequence[Split(regex, Isolated),
ByteLevel(use_regex=false)] pre-tokenizer, ByteLevel decoder, added tokens after the BPE vocabulary). Its own
encode must equal Hugging Face `tokenizers`' encode of the written file (tools/train/tests/test_tokenizer.py checks
that on the held-out corpus).
"""
from __future__ import annotations

import heapq
import json
import re
import sys
import unicodedata
from collections import Counter, defaultdict

# The pre-tokenizer regex as written into tokenizer.json (Rust/Oniguruma syntax): contractions, letters with one
# leading non-letter, single digits, punctuation runs, newlines, other whitespace.
SPLIT_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
               r"|\s*[\r\n]+|\s+(?!\S)|\s+")

# Unicode White_Space (what \s means in the Rust/Oniguruma regex; Python's \s also matches \x1c-\x1f).
_WHITE_SPACE = "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"


def _category_class(prefixes: tuple) -> str:
    """The body of a Python character class holding every code point whose general category starts with one of
    `prefixes` (e.g. ("L",) for \\p{L}), as ranges."""
    out, start, prev = [], None, None
    for cp in range(sys.maxunicode + 1):
        hit = 0xD800 > cp or cp > 0xDFFF
        hit = hit and unicodedata.category(chr(cp)).startswith(prefixes)
        if hit:
            if start is None:
                start = cp
            prev = cp
        elif start is not None:
            out.append(re.escape(chr(start)) + ("-" + re.escape(chr(prev)) if prev > start else ""))
            start = None
    if start is not None:
        out.append(re.escape(chr(start)) + ("-" + re.escape(chr(prev)) if prev > start else ""))
    return "".join(out)


def python_split_regex() -> re.Pattern:
    """SPLIT_REGEX translated to Python's `re` (which has no \\p{..}): the classes are spelled out."""
    L, N, S = _category_class(("L",)), _category_class(("N",)), _WHITE_SPACE
    pat = (rf"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n{L}{N}]?[{L}]+|[{N}]| ?[^{S}{L}{N}]+[\r\n]*"
           rf"|[{S}]*[\r\n]+|[{S}]+(?![^{S}])|[{S}]+")
    return re.compile(pat)


def bytes_to_unicode() -> dict:
    """GPT-2's byte alphabet: printable bytes map to themselves, the others to code points from 256 up."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    table, n = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + n)
            n += 1
    return table


BYTE_ENCODER = bytes_to_unicode()
BYTE_DECODER = {v: k for k, v in BYTE_ENCODER.items()}


class ByteLevelBPE:
    """vocab: token string -> id (ids 0..255 are the bytes in byte order); merges: list of (left, right) by rank;
    added: list of (content, id, special) appended after the BPE vocabulary."""

    def __init__(self, merges: list, added: list | None = None):
        self.merges = [tuple(m) for m in merges]
        self.vocab = {BYTE_ENCODER[b]: b for b in range(256)}
        for a, b in self.merges:
            self.vocab[a + b] = len(self.vocab)
        self.ranks = {m: i for i, m in enumerate(self.merges)}
        self.added = [tuple(a) for a in (added or [])]
        for content, tid, _ in self.added:
            if tid != len(self.vocab) + self.added.index((content, tid, _)):
                raise ValueError(f"added token {content!r} has id {tid}, expected ids after the BPE vocabulary")
        self.id_to_token = {i: t for t, i in self.vocab.items()}
        self.id_to_token.update({tid: c for c, tid, _ in self.added})
        self.added_ids = {c: tid for c, tid, _ in self.added}
        self._split = python_split_regex()
        self._added_re = (re.compile("|".join(re.escape(c) for c, _, _ in sorted(self.added, key=lambda a: -len(a[0]))))
                          if self.added else None)
        self._cache: dict = {}

    @property
    def vocab_size(self) -> int:
        return len(self.vocab) + len(self.added)

    # -- encoding --------------------------------------------------------------------------------------------------
    def pretokenize(self, text: str) -> list:
        """NFC, then the Split regex; each piece mapped to the byte alphabet."""
        text = unicodedata.normalize("NFC", text)
        return ["".join(BYTE_ENCODER[b] for b in m.group().encode("utf-8")) for m in self._split.finditer(text)]

    def _bpe(self, word: str) -> list:
        got = self._cache.get(word)
        if got is not None:
            return got
        parts = list(word)
        while len(parts) > 1:
            best, best_rank = None, None
            for i in range(len(parts) - 1):
                r = self.ranks.get((parts[i], parts[i + 1]))
                if r is not None and (best_rank is None or r < best_rank):
                    best, best_rank = i, r
            if best is None:
                break
            a, b = parts[best], parts[best + 1]
            merged, i = [], 0
            while i < len(parts):  # merge every occurrence, left to right
                if i + 1 < len(parts) and parts[i] == a and parts[i + 1] == b:
                    merged.append(a + b)
                    i += 2
                else:
                    merged.append(parts[i])
                    i += 1
            parts = merged
        ids = [self.vocab[p] for p in parts]
        if len(self._cache) < 500000:
            self._cache[word] = ids
        return ids

    def encode(self, text: str) -> list:
        """Added tokens are matched first (longest first); the text between them is normalised and split."""
        ids = []
        pos = 0
        pieces = []
        if self._added_re is not None:
            for m in self._added_re.finditer(text):
                pieces.append((text[pos:m.start()], None))
                pieces.append((None, self.added_ids[m.group()]))
                pos = m.end()
        pieces.append((text[pos:], None))
        for seg, tid in pieces:
            if tid is not None:
                ids.append(tid)
            elif seg:
                for w in self.pretokenize(seg):
                    ids.extend(self._bpe(w))
        return ids

    def decode(self, ids: list, skip_special: bool = False) -> str:
        special = {tid for _, tid, s in self.added if s}
        out, buf = [], []
        added_ids = set(self.added_ids.values())
        for i in ids:
            if i in added_ids:
                if buf:
                    out.append(bytes(buf).decode("utf-8", errors="replace"))
                    buf = []
                if not (skip_special and i in special):
                    out.append(self.id_to_token[i])
                continue
            buf.extend(BYTE_DECODER[c] for c in self.id_to_token[i])
        if buf:
            out.append(bytes(buf).decode("utf-8", errors="replace"))
        return "".join(out)

    # -- training --------------------------------------------------------------------------------------------------
    @classmethod
    def train(cls, texts, n_merges: int, added: list | None = None, min_count: int = 2, log=None):
        """Learns up to n_merges merges: repeatedly the most frequent adjacent pair over the pre-tokenised words
        (ties: the smaller (left, right) strings), counts updated incrementally."""
        splitter = cls([], [])
        words = Counter()
        for t in texts:
            words.update(splitter.pretokenize(t))
        syms = [list(w) for w in words]
        freq = [words[w] for w in words]
        pair_count: dict = defaultdict(int)
        where: dict = defaultdict(set)
        for wi, s in enumerate(syms):
            for a, b in zip(s, s[1:]):
                pair_count[(a, b)] += freq[wi]
                where[(a, b)].add(wi)
        heap = [(-c, p) for p, c in pair_count.items()]
        heapq.heapify(heap)
        merges = []
        while len(merges) < n_merges and heap:
            negc, pair = heapq.heappop(heap)
            if pair_count.get(pair, 0) != -negc:
                continue  # stale entry
            if -negc < min_count:
                break
            merges.append(pair)
            a, b = pair
            touched = set()
            for wi in list(where[pair]):
                s = syms[wi]
                f = freq[wi]
                for x, y in zip(s, s[1:]):
                    pair_count[(x, y)] -= f
                    touched.add((x, y))
                new, i = [], 0
                while i < len(s):
                    if i + 1 < len(s) and s[i] == a and s[i + 1] == b:
                        new.append(a + b)
                        i += 2
                    else:
                        new.append(s[i])
                        i += 1
                syms[wi] = new
                for x, y in zip(new, new[1:]):
                    pair_count[(x, y)] += f
                    where[(x, y)].add(wi)
                    touched.add((x, y))
            for p in touched:
                c = pair_count.get(p, 0)
                if c <= 0:
                    pair_count.pop(p, None)
                    where.pop(p, None)
                else:
                    heapq.heappush(heap, (-c, p))
            pair_count.pop(pair, None)
            where.pop(pair, None)
            if log and len(merges) % 500 == 0:
                log(f"  {len(merges)} merges, last {a + b!r} x{-negc}")
        base = 256 + len(merges)
        return cls(merges, [(c, base + i, s) for i, (c, s) in enumerate(added or [])])

    # -- Hugging Face files ----------------------------------------------------------------------------------------
    def to_hf_json(self) -> dict:
        bl = {"add_prefix_space": False, "trim_offsets": False, "use_regex": False}
        return {
            "version": "1.0",
            "truncation": None,
            "padding": None,
            "added_tokens": [{"id": tid, "content": c, "single_word": False, "lstrip": False, "rstrip": False,
                              "normalized": False, "special": s} for c, tid, s in self.added],
            "normalizer": {"type": "NFC"},
            "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
                {"type": "Split", "pattern": {"Regex": SPLIT_REGEX}, "behavior": "Isolated", "invert": False},
                dict({"type": "ByteLevel"}, **bl)]},
            "post_processor": dict({"type": "ByteLevel"}, **bl),
            "decoder": dict({"type": "ByteLevel"}, **bl),
            "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                      "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                      "vocab": self.vocab, "merges": [list(m) for m in self.merges]},
        }

    @classmethod
    def from_hf_json(cls, path: str):
        with open(path, encoding="utf-8") as f:
            j = json.load(f)
        m = j["model"]
        if m.get("type") != "BPE" or j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] != SPLIT_REGEX:
            raise ValueError(f"{path}: not a tokenizer written by tools/train/bpe.py")
        merges = [tuple(x) if isinstance(x, list) else tuple(x.split(" ")) for x in m["merges"]]
        tok = cls(merges, [(a["content"], a["id"], a["special"]) for a in j["added_tokens"]])
        if tok.vocab != m["vocab"]:
            raise ValueError(f"{path}: vocab does not follow from the merges")
        return tok
