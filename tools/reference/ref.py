#!/usr/bin/python3
"""Run the Python reference on a checkpoint directory, with token ids (no tokenizer here).

  /usr/bin/python3 tools/reference/ref.py generate --model DIR --ids 5,17,42 --steps 32 [--mode q8kv4] [--kv bf16]
  /usr/bin/python3 tools/reference/ref.py score --model DIR --ids-file ids.json [--chunk 512]   # JSON list of ids

Common flags: --mode exact|q8kv4, --kv nvfp4|fp8|bf16 (default: the config's), --topk keyed|float, --dense,
--float64, --device cpu|cuda. Output is JSON on stdout.
"""
import argparse
import json
import math
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from msaref.checkpoint import load_model  # noqa: E402
from msaref.model import Runtime  # noqa: E402
from msaref.runner import run, score  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=["generate", "score"])
    ap.add_argument("--model", required=True)
    ap.add_argument("--ids", help="comma-separated token ids")
    ap.add_argument("--ids-file", help="a JSON list of token ids")
    ap.add_argument("--steps", type=int, default=32)
    ap.add_argument("--chunk", type=int, default=512)
    ap.add_argument("--mode", choices=["exact", "q8kv4"], default="exact")
    ap.add_argument("--kv", choices=["nvfp4", "fp8", "bf16"])
    ap.add_argument("--topk", choices=["keyed", "float"], default="keyed")
    ap.add_argument("--dense", action="store_true", help="dense attention in every layer")
    ap.add_argument("--float64", action="store_true")
    ap.add_argument("--device", default="cpu")
    a = ap.parse_args()
    if a.ids:
        ids = [int(t) for t in a.ids.split(",") if t.strip()]
    elif a.ids_file:
        ids = [int(t) for t in json.load(open(a.ids_file))]
    else:
        ap.error("give --ids or --ids-file")
    model, cfg = load_model(a.model, device=a.device, dtype=torch.float64 if a.float64 else torch.float32)
    rt = Runtime(mode=a.mode, kv_dtype=a.kv, topk_method=a.topk, force_dense=a.dense)
    t = time.time()
    if a.command == "generate":
        r = run(model, [ids], rt, n_greedy=a.steps)
        out = {"tokens": r.greedy[0], "prefill_s": round(r.prefill_s, 3),
               "decode_tok_s": round((a.steps - 1) / r.decode_s, 2) if r.decode_s else None}
    else:
        lps = score(model, ids, rt, a.chunk)
        nll = -sum(lps) / len(lps)
        out = {"tokens": len(ids), "mean_nll": nll, "perplexity": math.exp(nll), "logprobs": lps}
    out["seconds"] = round(time.time() - t, 3)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
