"""Golden outputs of the DSpark drafter (drafter.py, the normative definition) for the C++ parity test
(tests/engine/dspark_parity_test.cpp).

For a model directory with a drafter (default: models/default): a fixed token sequence (a text prompt and the
target's greedy continuation), the target's taps over it (model.py TinyM3 with the shipped numerics, exactly as
quality.py conditions the drafter), and at several anchors the drafter's greedy drafts and the logits they were
chosen from (U_j + Markov(x_j), x_0 = anchor, x_j = draft j-1), once with the config's sliding window and once with a
small window so that the window's edge is exercised. Written as one safetensors file:

  tokens      I32 [T]                  the sequence (position = index)
  taps        F32 [T, n_taps*hidden]   tap layers' residual streams, concatenated in target_layer_ids order
  anchors     I32 [M]                  anchor positions n (context = positions [0, n), anchor token = tokens[n])
  logits_w<W> F32 [M, B, V]            greedy logits with sliding window W
  drafts_w<W> I32 [M, B]               greedy drafts with sliding window W
  metadata: windows (comma-separated), target_layer_ids

Usage: /usr/bin/python3 tools/train/dspark_golden.py --out golden.safetensors [--model models/default]
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tools", "reference"))
from bpe import ByteLevelBPE  # noqa: E402
from drafter import DrafterConfig, DSparkDrafter  # noqa: E402
from export import read_drafter_state, tiny_from_dir  # noqa: E402
from model import Mode, TinyM3  # noqa: E402
from msaref.safetensors_io import write_file  # noqa: E402

# The numerics the drafter was trained and evaluated with (quality.py acceptance_length).
TARGET_MODE = Mode(sparse=True, kv="nvfp4", w4a4=True, w4a4_weights=False)


PROMPT = "Genesis 1\n1 In the beginning God created the heaven and the earth.\n2 And the earth was"


def drafter_config(drafter_dir: str) -> DrafterConfig:
    with open(os.path.join(drafter_dir, "config.json")) as f:
        dj = json.load(f)
    return DrafterConfig(hidden_size=dj["hidden_size"], num_layers=dj["num_hidden_layers"],
                         num_heads=dj["num_attention_heads"], num_kv_heads=dj["num_key_value_heads"],
                         head_dim=dj["head_dim"], rotary_dim=dj["rotary_dim"], rope_theta=dj["rope_theta"],
                         rms_norm_eps=dj["rms_norm_eps"], intermediate_size=dj["intermediate_size"],
                         swiglu_alpha=dj["swiglu_alpha"], swiglu_limit=dj["swiglu_limit"],
                         target_layer_ids=dj["target_layer_ids"], block_size=dj["dspark_block_size"],
                         sliding_window=dj["sliding_window"], markov_rank=dj["markov_head"]["rank"],
                         mask_token_id=dj["mask_token_id"], vocab_size=dj["vocab_size"])


@torch.no_grad()
def greedy_block(drafter: DSparkDrafter, target: TinyM3, taps, tokens, n: int):
    """drafter.draft's computation at anchor n (context = positions [0, n)), keeping the logits of each step."""
    c = drafter.c
    anchors = torch.tensor([n])
    prev = torch.zeros(1, 1, c.block_size, dtype=torch.long)
    u = drafter(taps[:, :n], target.model.embed_tokens, target.lm_head, tokens[n].view(1, 1), prev, anchors)
    u = u - drafter.markov_head(prev).float()
    logits, drafts, x = [], [], int(tokens[n])
    for j in range(c.block_size):
        lg = u[0, 0, j] + drafter.markov_head(torch.tensor([x])).float()[0]
        x = int(torch.argmax(lg))
        logits.append(lg)
        drafts.append(x)
    # drafter.draft is the definition: the kept logits must give its drafts
    assert drafts == drafter.draft(taps[:, :n], target.model.embed_tokens, target.lm_head, int(tokens[n]))
    return torch.stack(logits), drafts


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default=os.path.join(ROOT, "models", "default"))
    ap.add_argument("--out", required=True)
    ap.add_argument("--length", type=int, default=72)
    ap.add_argument("--small-window", type=int, default=20)
    args = ap.parse_args()
    torch.set_num_threads(1)

    target = tiny_from_dir(args.model)
    dc = drafter_config(os.path.join(args.model, "drafter"))
    # a text prompt, then the target's greedy continuation
    tok = ByteLevelBPE.from_hf_json(os.path.join(args.model, "tokenizer.json"))
    tokens = torch.tensor(tok.encode(PROMPT), dtype=torch.long)
    with torch.no_grad():
        while tokens.numel() < args.length:
            h = target(tokens[None], TARGET_MODE)
            nxt = int(target.logits(h[:, -1]).argmax(-1))
            tokens = torch.cat([tokens, torch.tensor([nxt])])
        stats = {}
        target(tokens[None], TARGET_MODE, taps=tuple(dc.target_layer_ids), stats=stats)
        taps = torch.cat([stats["taps"][i] for i in dc.target_layer_ids], -1).float()

    T = tokens.numel()
    P = len(tok.encode(PROMPT))
    anchors = [1, 9, P, P + 13, T - 20, T - 1]
    out = {"tokens": ("I32", tokens.numpy().astype(np.int32)),
           "taps": ("F32", taps[0].numpy().astype(np.float32)),
           "anchors": ("I32", np.array(anchors, dtype=np.int32))}
    windows = [dc.sliding_window, args.small_window]
    state = read_drafter_state(os.path.join(args.model, "drafter"))
    for w in windows:
        drafter = DSparkDrafter(dataclasses.replace(dc, sliding_window=w))
        drafter.load_state_dict(state)
        drafter.eval()
        lg, dr = zip(*(greedy_block(drafter, target, taps, tokens, n) for n in anchors))
        out[f"logits_w{w}"] = ("F32", torch.stack(lg).numpy().astype(np.float32))
        out[f"drafts_w{w}"] = ("I32", np.array(dr, dtype=np.int32))
        hits = sum(int(d[0] == int(tokens[n + 1])) for d, n in zip(dr, anchors) if n + 1 < T)
        print(f"window {w}: first drafts equal to the target's next token at {hits} of {len(anchors) - 1} anchors",
              file=sys.stderr)
    write_file(args.out, out, metadata={"windows": ",".join(str(w) for w in windows),
                                        "target_layer_ids": ",".join(str(i) for i in dc.target_layer_ids)})


if __name__ == "__main__":
    main()
