#!/usr/bin/env python3
"""Builds the training corpus of the default model from public-domain English text in Debian packages.

Sources (scripts/setup.sh --test installs them):
  kjv      the King James Bible (bible-kjv + bible-kjv-text): `bible -p /usr/lib 'Gen1:1-Rev22:21'`, one document per
           book; the 80-column wrapping is undone so that each verse is one line "N text".
  fortunes the English fortune files of `fortunes` (/usr/share/games/fortunes; *.dat/*.u8 indexes, the Chinese and
           Russian files and the ASCII-art file skipped); one document per fortune, grouped by file.
  jargon   the Jargon File 4.4.7 (`jargon-text`): the front chapters, one group per glossary letter and the
           appendices; the glossary's table of contents (a bare list of headwords) is dropped.

The split is by group (a Bible book, a fortune file, a jargon section), fixed below, so no held-out text shares a
document with the training text. Output (in --out, default tools/train/data):
  corpus_train.jsonl, corpus_heldout.jsonl   one JSON object per document: {"group": ..., "text": ...}
  manifest.json                              every group, its split, documents, characters, and sha256 of the files
The output is deterministic: the same packages give byte-identical files.
"""
from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import re
import subprocess
import sys

BIBLE_DATA = "/usr/lib"
FORTUNE_DIR = "/usr/share/games/fortunes"
JARGON = "/usr/share/doc/jargon-text/jargon.txt.gz"

HELDOUT_BOOKS = ("Ruth", "Ecclesiastes", "Jonah", "Mark", "Philippians", "Jude")
HELDOUT_FORTUNES = ("education", "food", "pets", "riddles", "startrek")
HELDOUT_JARGON = ("glossary-K", "glossary-W")
SKIPPED_FORTUNES = ("chinese", "song100", "tang300", "ascii-art")  # not English prose


def fail(msg: str):
    sys.exit(f"build_corpus: {msg}")


# --------------------------------------------------------------------------------------------------------------
def kjv_documents():
    """[(group, text)]: one per book. Chapter headers are "Book N" lines between blank lines; verses start with
    spaces and the verse number; continuation lines have no indent."""
    try:
        raw = subprocess.run(["bible", "-p", BIBLE_DATA, "Gen1:1-Rev22:21"], check=True, capture_output=True,
                             env=dict(os.environ, COLUMNS="80")).stdout.decode("ascii")
    except (OSError, subprocess.CalledProcessError) as e:
        fail(f"cannot run `bible` (install bible-kjv and bible-kjv-text: scripts/setup.sh --test): {e}")
    lines = raw.split("\n")
    books: list[tuple[str, list[str]]] = []
    header = re.compile(r"^(\S.*) (\d+)$")
    verse = re.compile(r"^ +(\d+) (.*)$")
    for i, line in enumerate(lines):
        prev_blank = i == 0 or lines[i - 1] == ""
        next_blank = i + 1 >= len(lines) or lines[i + 1] == ""
        m = header.match(line)
        if m and prev_blank and next_blank:
            book, chap = m.group(1), m.group(2)
            if not books or books[-1][0] != book:
                books.append((book, []))
            books[-1][1].append(f"{book} {chap}\n")
            continue
        if not line:
            continue
        if not books:
            fail(f"unexpected text before the first chapter header: {line!r}")
        v = verse.match(line)
        if v:
            books[-1][1].append(f"{v.group(1)} {v.group(2)}")
        else:  # continuation of the verse above
            books[-1][1][-1] += " " + line.strip()
    if len(books) != 66:
        fail(f"expected 66 books of the KJV, parsed {len(books)}")
    docs = []
    for book, parts in books:
        text = ""
        for p in parts:
            text += ("\n" if p.endswith("\n") and text else "") + p + ("" if p.endswith("\n") else "\n")
        docs.append((book, text))
    return docs


# --------------------------------------------------------------------------------------------------------------
_OVERSTRIKE = re.compile(r".\x08")


def fortune_documents():
    """[(group, text)]: one per fortune; group = the file name."""
    if not os.path.isdir(FORTUNE_DIR):
        fail(f"{FORTUNE_DIR} is missing (install fortunes: scripts/setup.sh --test)")
    docs = []
    for name in sorted(os.listdir(FORTUNE_DIR)):
        path = os.path.join(FORTUNE_DIR, name)
        if not os.path.isfile(path) or name.endswith((".dat", ".u8")) or name in SKIPPED_FORTUNES:
            continue
        with open(path, "rb") as f:
            text = f.read().decode("utf-8")
        text = _OVERSTRIKE.sub("", text)  # nroff-style bold/underline (x\bx, _\bx)
        for item in re.split(r"\n%\n", text):
            item = "\n".join(l.rstrip() for l in item.strip("%\n").split("\n")).strip("\n")
            if item.strip():
                docs.append((name, item + "\n"))
    return docs


# --------------------------------------------------------------------------------------------------------------
def jargon_documents():
    """[(group, text)]: the front chapters, each glossary letter section, the appendices."""
    try:
        with gzip.open(JARGON, "rt", encoding="utf-8") as f:
            lines = f.read().replace("\u00a0", " ").split("\n")  # no-break spaces in headings
    except OSError as e:
        fail(f"cannot read {JARGON} (install jargon-text: scripts/setup.sh --test): {e}")
    try:
        glossary = max(i for i, l in enumerate(lines[:3000]) if l == "Glossary")  # the last one opens the glossary
        appendix = next(i for i, l in enumerate(lines) if l.startswith("Appendix A. "))
    except (ValueError, StopIteration):  # max() of nothing, next() of nothing
        fail(f"{JARGON}: 'Glossary' / 'Appendix A.' headings not found (unexpected version)")
    letters = [i for i in range(glossary, appendix) if re.fullmatch(r"  [0-9A-Z]", lines[i])]
    if len(letters) != 27:
        fail(f"{JARGON}: expected 27 glossary sections (0, A-Z), found {len(letters)}")

    def clean(chunk):
        out = [l[3:] if l.startswith("   ") else l.strip() for l in chunk]
        return re.sub(r"\n{3,}", "\n\n", "\n".join(l.rstrip() for l in out)).strip("\n") + "\n"

    docs = [("front", clean(lines[:glossary]))]
    bounds = letters + [appendix]
    for a, b in zip(bounds[:-1], bounds[1:]):
        docs.append((f"glossary-{lines[a].strip()}", clean(lines[a + 1:b])))
    docs.append(("appendices", clean(lines[appendix:])))
    return docs


# --------------------------------------------------------------------------------------------------------------
def build(out_dir: str, manifest_path: str):
    sources = [("kjv", kjv_documents(), HELDOUT_BOOKS), ("fortunes", fortune_documents(), HELDOUT_FORTUNES),
               ("jargon", jargon_documents(), HELDOUT_JARGON)]
    os.makedirs(out_dir, exist_ok=True)
    groups: dict = {}
    files = {"train": [], "heldout": []}
    for src, docs, held in sources:
        names = {g for g, _ in docs}
        missing = set(held) - names
        if missing:
            fail(f"held-out {src} groups not found: {sorted(missing)}")
        for g, text in docs:
            split = "heldout" if g in held else "train"
            key = f"{src}/{g}"
            info = groups.setdefault(key, {"source": src, "group": g, "split": split, "documents": 0, "chars": 0})
            info["documents"] += 1
            info["chars"] += len(text)
            files[split].append(json.dumps({"group": key, "text": text}, ensure_ascii=False))
    manifest = {"description": "MSA Engine default-model corpus (tools/train/build_corpus.py)",
                "heldout_rule": {"kjv books": list(HELDOUT_BOOKS), "fortune files": list(HELDOUT_FORTUNES),
                                 "jargon sections": list(HELDOUT_JARGON)},
                "skipped_fortune_files": list(SKIPPED_FORTUNES), "files": {}, "groups": list(groups.values())}
    for split, rows in files.items():
        path = os.path.join(out_dir, f"corpus_{split}.jsonl")
        data = ("\n".join(rows) + "\n").encode("utf-8")
        with open(path, "wb") as f:
            f.write(data)
        chars = sum(g["chars"] for g in groups.values() if g["split"] == split)
        manifest["files"][os.path.basename(path)] = {"documents": len(rows), "chars": chars,
                                                     "sha256": hashlib.sha256(data).hexdigest()}
    for path in (os.path.join(out_dir, "manifest.json"), manifest_path):
        with open(path, "w") as f:
            json.dump(manifest, f, indent=1)
            f.write("\n")
    return manifest


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "data"))
    ap.add_argument("--manifest", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                       "corpus_manifest.json"), help="committed copy of the manifest")
    args = ap.parse_args()
    m = build(args.out, args.manifest)
    for name, f in m["files"].items():
        print(f"{name}: {f['documents']} documents, {f['chars']} characters")


if __name__ == "__main__":
    main()
