#!/usr/bin/env python3
"""One-command check of the reference on a CUDA machine with PyTorch 2.x (what tools/train/ will run on):

  python3 tools/reference/gpu_check.py --out "$OUT"

1. Number formats on CUDA equal the CPU results bit for bit, and equal PyTorch's own float8_e4m3fn / float8_e5m2
   casts (an independent implementation) on every float32 value that is a BF16 value, every midpoint between
   neighbouring E4M3/E5M2 values and their float32 neighbours. The inputs and torch's results are written to
   $OUT/torch_float8_casts.{json,bin} so that they can serve as golden files elsewhere.
2. The tiny-mix model (generated on the fly): inference step() on CUDA vs CPU (exact and q8kv4), and a training
   forward/backward on CUDA with the manual and the SDPA attention paths; timings.
Writes $OUT/gpu_check.json and exits non-zero when a check fails.
"""
import argparse
import json
import math
import os
import sys
import tempfile
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from gen_checkpoint import generate  # noqa: E402
from msaref import formats as fm  # noqa: E402
from msaref.checkpoint import load_model  # noqa: E402
from msaref.model import Runtime  # noqa: E402


def cast_inputs():
    bf = (np.arange(65536, dtype=np.uint32) << 16).view(np.float32)
    xs = [bf[np.isfinite(bf)]]
    for vals in (fm.e4m3_code_values(), fm.e5m2_code_values()):
        v = np.unique(vals[torch.isfinite(vals)].numpy())
        mids = ((v[:-1] + v[1:]) / 2).astype(np.float32)
        xs += [mids, np.nextafter(mids, np.float32(-np.inf)), np.nextafter(mids, np.float32(np.inf))]
    x = np.concatenate(xs).astype(np.float32)
    return np.unique(x[np.isfinite(x)])


def check_formats(dev, report):
    x = torch.from_numpy(cast_inputs())
    xd = x.to(dev)
    ok = True
    res = {}
    for name, fn in (("e4m3_sat", lambda t: fm.e4m3(t, True)), ("e4m3_ieee", lambda t: fm.e4m3(t, False)),
                     ("e5m2_ieee", lambda t: fm.e5m2(t, False)), ("bf16", fm.bf16),
                     ("e2m1", lambda t: fm.round_to_format(t, fm.E2M1, True))):
        a, b = fn(x), fn(xd).cpu()
        same = torch.equal(torch.nan_to_num(a, nan=1234.5), torch.nan_to_num(b, nan=1234.5))
        res[f"{name}_cpu_equals_cuda"] = same
        ok &= same
    q, qd = fm.nvfp4_quantize_kv(x[: (len(x) // 16) * 16].reshape(-1, 16)), \
        fm.nvfp4_quantize_kv(xd[: (len(x) // 16) * 16].reshape(-1, 16))
    res["nvfp4_cpu_equals_cuda"] = torch.equal(q.codes, qd.codes.cpu()) and torch.equal(q.scales, qd.scales.cpu())
    ok &= res["nvfp4_cpu_equals_cuda"]
    if hasattr(torch, "float8_e4m3fn"):
        for name, dt, mine in (("e4m3fn", torch.float8_e4m3fn, lambda t: fm.e4m3(t, False)),
                               ("e5m2", torch.float8_e5m2, lambda t: fm.e5m2(t, False))):
            theirs = xd.to(dt).float().cpu()
            m = mine(x)
            eq = (theirs == m) | (torch.isnan(theirs) & torch.isnan(m))
            res[f"{name}_matches_torch_float8"] = int((~eq).sum()) == 0
            res[f"{name}_mismatches"] = int((~eq).sum())
            ok &= res[f"{name}_matches_torch_float8"]
            theirs.numpy().astype("<f4").tofile(os.path.join(report["out"], f"torch_float8_{name}.bin"))
        x.numpy().astype("<f4").tofile(os.path.join(report["out"], "torch_float8_inputs.bin"))
        with open(os.path.join(report["out"], "torch_float8_casts.json"), "w") as f:
            json.dump({"inputs": "torch_float8_inputs.bin", "count": len(x), "torch": torch.__version__,
                       "casts": {"e4m3fn": "torch_float8_e4m3fn.bin", "e5m2": "torch_float8_e5m2.bin"},
                       "note": "x.to(torch.float8_*).float(): RNE, non-saturating (e4m3fn overflow -> NaN)"}, f)
    report["formats"] = res
    return ok


def check_model(dev, report):
    ok = True
    d = tempfile.mkdtemp(prefix="msaref-gpu-")
    generate(d, "tiny-mix")
    cpu, cfg = load_model(d)
    gpu, _ = load_model(d, device=dev)
    g = torch.Generator().manual_seed(0)
    toks = torch.randint(3, cfg.vocab_size, (2000,), generator=g).tolist()
    res = {}
    for mode in ("exact", "q8kv4"):
        rt = Runtime(mode=mode)
        out = []
        for m in (cpu, gpu):
            st = m.new_sequence(rt)
            t = time.time()
            r = m.step([st], [toks], rt, record_layers=(1, 2))
            torch.cuda.synchronize() if m is gpu else None
            out.append((r, time.time() - t))
        a, b = out[0][0].logits[0], out[1][0].logits[0].cpu()
        rel = ((a - b).abs().amax(-1) / a.abs().amax(-1))
        nsel = sum(int((x[0]["sel"] != y[0]["sel"].cpu()).any(-1).any(-1).sum())
                   for x, y in zip(out[0][0].selections.values(), out[1][0].selections.values()))
        res[mode] = {"rel_err_median": float(rel.median()), "rel_err_max": float(rel.max()),
                     "tokens_with_selection_difference": nsel, "cpu_s": out[0][1], "cuda_s": out[1][1]}
        ok &= float(rel.median()) < (1e-4 if mode == "exact" else 2e-3)
    # training forward/backward
    gpu.train()
    ids = torch.randint(3, cfg.vocab_size, (8, 2048), generator=g).to(dev)
    for impl in ("manual", "sdpa"):
        if impl == "sdpa" and not hasattr(torch.nn.functional, "scaled_dot_product_attention"):
            continue
        gpu.zero_grad()
        rt = Runtime(attn_impl=impl)
        torch.cuda.synchronize()
        t = time.time()
        aux = {}
        logits = gpu(ids, rt, aux=aux)
        loss = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, cfg.vocab_size), ids[:, 1:].reshape(-1))
        loss.backward()
        torch.cuda.synchronize()
        grads_ok = all(p.grad is None or bool(torch.isfinite(p.grad).all()) for p in gpu.parameters())
        res[f"train_{impl}"] = {"loss": float(loss), "seconds": time.time() - t, "grads_finite": grads_ok,
                                "max_memory_gb": torch.cuda.max_memory_allocated() / 2 ** 30}
        ok &= grads_ok and math.isfinite(float(loss))
    if "train_sdpa" in res:
        res["train_sdpa_vs_manual_loss_diff"] = abs(res["train_sdpa"]["loss"] - res["train_manual"]["loss"])
        ok &= res["train_sdpa_vs_manual_loss_diff"] < 1e-3
    report["model"] = res
    return ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    dev = torch.device("cuda")
    report = {"torch": torch.__version__, "device": torch.cuda.get_device_name(0), "out": a.out}
    ok = check_formats(dev, report)
    ok &= check_model(dev, report)
    report["ok"] = bool(ok)
    del report["out"]
    with open(os.path.join(a.out, "gpu_check.json"), "w") as f:
        json.dump(report, f, indent=2)
    print(json.dumps(report, indent=2))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
