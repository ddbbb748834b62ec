#!/usr/bin/env python3
"""Copies what the GPU training run needs into one directory (the GPU machine has no Debian packages and no
internet, so the corpus is built and tokenized here):

  /usr/bin/python3 tools/train/stage.py STAGE_DIR

STAGE_DIR gets train.bin, heldout.bin, data.json (tools/train/data, from build_corpus.py and prepare_data.py) and
tokenizer.json (models/default). It checks that the token ids were made with this tokenizer.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    data = os.path.join(HERE, "data")
    tok = os.path.join(ROOT, "models", "default", "tokenizer.json")
    with open(os.path.join(data, "data.json")) as f:
        info = json.load(f)
    with open(tok, "rb") as f:
        sha = hashlib.sha256(f.read()).hexdigest()
    if sha != info["tokenizer_sha256"]:
        sys.exit("stage: tools/train/data was tokenized with another tokenizer: run tools/train/prepare_data.py")
    os.makedirs(out, exist_ok=True)
    for src in (os.path.join(data, "train.bin"), os.path.join(data, "heldout.bin"), os.path.join(data, "data.json"),
                tok):
        shutil.copy(src, out)
    total = sum(os.path.getsize(os.path.join(out, f)) for f in os.listdir(out))
    print(f"staged {sorted(os.listdir(out))} in {out}: {total / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
