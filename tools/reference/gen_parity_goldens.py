#!/usr/bin/python3
"""Write the parity goldens the C++ tests read (format: tools/reference/README.md, section "Golden files").

  /usr/bin/python3 tools/reference/gen_parity_goldens.py                 # all CI presets -> tests/reference/goldens
  /usr/bin/python3 tools/reference/gen_parity_goldens.py --presets tiny-mix --out /tmp/goldens
  /usr/bin/python3 tools/reference/gen_parity_goldens.py --model DIR --name mine --out /tmp/goldens  # any checkpoint

For every preset: generate its checkpoint (deterministic, SHA-256 recorded), run the reference in float64 (the golden
values) and in float32 (to measure the reference's own float32 noise and to choose well-conditioned test positions)
for each run of RUNS, and write logits, selected blocks and 64-step greedy continuations.
"""
import argparse
import hashlib
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from gen_checkpoint import generate  # noqa: E402
from msaref.checkpoint import load_model  # noqa: E402
from msaref.model import Runtime  # noqa: E402
from msaref.presets import CI_PRESETS, _splitmix64  # noqa: E402
from msaref.runner import run  # noqa: E402

FORMAT_VERSION = 1
RUNS = [  # (mode, kv dtype, top-k method)
    ("exact", "nvfp4", "keyed"), ("q8kv4", "nvfp4", "keyed"),
    ("exact", "fp8", "keyed"), ("q8kv4", "fp8", "keyed"),
    ("exact", "bf16", "keyed"), ("q8kv4", "bf16", "keyed"),
    ("exact", "nvfp4", "float"),
]
PROMPT_LENGTHS = (2400, 1500, 600)
N_GREEDY = 64
POSITIONS_PER_SEQ = 4
DECODE_STEPS = (0, N_GREEDY - 2)  # logits recorded at the positions of greedy tokens 0 and 62
# A candidate position becomes a test position when no discrete decision taken for that token is close to a tie,
# so that another correct float32 implementation takes the same decisions there:
# - the float32 reference agrees with the float64 one within CHOOSE_THRESHOLD (relative error of the logits row) and
#   selects the same blocks in every MSA layer;
# - in every MoE layer the last chosen and first unchosen biased router scores differ by >= ROUTE_MARGIN;
# - in every MSA layer and group that ranks history blocks, the (k-1)-th and k-th best block scores differ by
#   >= SEL_MARGIN times the row's score range (max - min; one keyed step is range / 65534).
CHOOSE_THRESHOLD = {"exact": 2e-5, "q8kv4": 5e-4}
ROUTE_MARGIN = {"exact": 1e-4, "q8kv4": 1e-3}
SEL_MARGIN = {"exact": 1e-4, "q8kv4": 3e-3}


def make_prompts(vocab: int, lengths=PROMPT_LENGTHS, seed: int = 1701):
    """Deterministic token ids in [3, vocab) (0-2 are left to special tokens); the second half of each prompt repeats
    a span of its first half, so that attention has something to find."""
    prompts = []
    for s, L in enumerate(lengths):
        off = int.from_bytes(hashlib.sha256(f"prompt:{seed}:{s}".encode()).digest()[:8], "little")
        with np.errstate(over="ignore"):
            z = _splitmix64(np.arange(L, dtype=np.uint64) + np.uint64(off))
        ids = (z % np.uint64(vocab - 3)).astype(np.int64) + 3
        span = min(200, L // 4)
        ids[L // 2:L // 2 + span] = ids[L // 8:L // 8 + span]
        prompts.append(ids.tolist())
    return prompts


def rel_err(a: torch.Tensor, ref: torch.Tensor) -> float:
    """max |a - ref| / max |ref| over one logits row."""
    return float((a.double() - ref.double()).abs().max() / ref.double().abs().max())


def candidates(L: int):
    c = [L - 1, L - 2, 2048, 2049, 2100, 2200, 2300, 512, 128, 127, 1023, 1500, 2047, 255, 0, 1, 700, 900, 1200,
         L - 5, L - 10, 1800, 1900, 2000]
    out = []
    for p in c:
        if 0 <= p < L and p not in out:
            out.append(p)
    return out


def run_pair(m64, m32, prompts, rt, layers):
    r64 = run(m64, prompts, rt, N_GREEDY, record_layers=layers)
    r32 = run(m32, prompts, rt, N_GREEDY, record_layers=layers)
    return r64, r32


def selection_margin(r, si, p, msa_layers, topk):
    """Smallest gap between the (k-1)-th and k-th best history block scores, relative to the row's range."""
    m = math.inf
    for li in msa_layers:
        sel, bs = r.selections[(li, si, p)]
        for g in range(bs.shape[0]):
            valid = [b for b in sel[g].tolist() if b >= 0]
            local = valid[-1]
            if local + 1 <= topk:
                continue
            v = torch.sort(bs[g, :local].double(), descending=True).values
            rng = float(v[0] - v[-1])
            if rng > 0:
                m = min(m, float(v[topk - 2] - v[topk - 1]) / rng)
    return m


def routing_margin(r, si, p):
    vals = [v for (li, s, q), v in r.routing.items() if s == si and q == p]
    return min(vals) if vals else math.inf


def prompt_logprobs(r, prompts):
    """Per prompt: log p(prompt[p + 1] | prompt[: p + 1]) for p = 0 .. L-2, in float64."""
    out = []
    for si, pr in enumerate(prompts):
        lg = torch.stack([r.logits[(si, p)] for p in range(len(pr) - 1)]).double()
        lp = torch.log_softmax(lg, dim=-1).gather(1, torch.tensor(pr[1:]).unsqueeze(1)).squeeze(1)
        out.append(lp.numpy())
    return out


def _num(x: float):
    return None if math.isinf(x) else float(f"{x:.3g}")


def write_run(out_dir: str, name: str, prompts, rt: Runtime, r64, r32, msa_layers, topk: int, block: int):
    os.makedirs(os.path.join(out_dir, name), exist_ok=True)
    S = len(prompts)
    # statistics of the float32 reference against the float64 one, over every prefill position
    errs, errs_clean, sel_rows_diff, sel_rows = [], [], 0, 0
    flipped = set()
    for (li, si, p), v64 in r64.selections.items():
        v32 = r32.selections[(li, si, p)]
        sel_rows += v64[0].shape[0]
        diff = (torch.sort(v64[0], -1).values != torch.sort(v32[0], -1).values).any(-1)
        sel_rows_diff += int(diff.sum())
        if bool(diff.any()):
            flipped.add((si, p))
    for (si, p), l64 in r64.logits.items():
        if p >= len(prompts[si]):
            continue
        e = rel_err(r32.logits[(si, p)], l64)
        errs.append(e)
        if (si, p) not in flipped:
            errs_clean.append(e)
    errs_t = torch.tensor(errs, dtype=torch.float64)
    clean_t = torch.tensor(errs_clean, dtype=torch.float64)

    def ok(si, p):
        if (si, p) in flipped or (si, p) not in r32.logits:
            return False
        return (rel_err(r32.logits[(si, p)], r64.logits[(si, p)]) <= CHOOSE_THRESHOLD[rt.mode]
                and routing_margin(r64, si, p) >= ROUTE_MARGIN[rt.mode]
                and selection_margin(r64, si, p, msa_layers, topk) >= SEL_MARGIN[rt.mode])

    rows = []
    for si in range(S):
        L = len(prompts[si])
        chosen = [p for p in candidates(L) if ok(si, p)][:POSITIONS_PER_SEQ]
        agree = 0
        while agree < N_GREEDY and r64.greedy[si][agree] == r32.greedy[si][agree]:
            agree += 1
        for p in sorted(chosen):
            rows.append({"seq": si, "pos": p, "phase": "prefill"})
        for s in DECODE_STEPS:
            p = L + s
            if s < agree and ok(si, p):
                rows.append({"seq": si, "pos": p, "phase": "decode"})
    logits = np.stack([r64.logits[(r["seq"], r["pos"])].numpy().astype("<f4") for r in rows])
    for r in rows:
        k = (r["seq"], r["pos"])
        r["ref_fp32_rel_err"] = float(f"{rel_err(r32.logits[k], r64.logits[k]):.3g}")
        r["routing_margin"] = _num(routing_margin(r64, *k))
        r["selection_margin"] = _num(selection_margin(r64, *k, msa_layers, topk))
    logits.tofile(os.path.join(out_dir, name, "logits.bin"))
    sel_rows_out, scores = [], []
    for r in rows:
        for li in msa_layers:
            sel, bs = r64.selections[(li, r["seq"], r["pos"])]
            local = r["pos"] // block
            n_hist = local if local + 1 > topk else 0  # history scores only where a ranking happened
            for g in range(sel.shape[0]):
                row = sel[g].tolist()
                sel_rows_out.append({"layer": li, "seq": r["seq"], "pos": r["pos"], "group": g, "sel": row,
                                     "scores_offset": len(scores), "n_hist": n_hist})
                scores.extend(bs[g, :n_hist].double().tolist())
    np.array(scores, dtype="<f4").tofile(os.path.join(out_dir, name, "block_scores.bin"))
    # log-probabilities of every prompt token given its prefix (what `msa score` reports), and perplexities
    lp64, lp32 = prompt_logprobs(r64, prompts), prompt_logprobs(r32, prompts)
    np.concatenate(lp64).astype("<f4").tofile(os.path.join(out_dir, name, "logprobs.bin"))
    ppl64 = [math.exp(-float(np.mean(x))) for x in lp64]
    ppl32 = [math.exp(-float(np.mean(x))) for x in lp32]
    dlp = np.abs(np.concatenate(lp64) - np.concatenate(lp32))
    greedy_agree = []
    for si in range(S):
        a = 0
        while a < N_GREEDY and r64.greedy[si][a] == r32.greedy[si][a]:
            a += 1
        greedy_agree.append(a)
    meta = {
        "mode": rt.mode, "kv_dtype": rt.kv_dtype, "topk_method": rt.topk_method, "compute": "float64",
        "logits": {"file": "logits.bin", "dtype": "float32", "shape": [len(rows), int(logits.shape[1])],
                   "rows": rows},
        "selections": {"scores_file": "block_scores.bin", "scores_dtype": "float32", "rows": sel_rows_out},
        "logprobs": {"file": "logprobs.bin", "dtype": "float32", "counts": [len(x) for x in lp64],
                     "perplexity": [float(f"{v:.7g}") for v in ppl64],
                     "perplexity_fp32_reference": [float(f"{v:.7g}") for v in ppl32],
                     "fp32_reference_abs_diff_median": float(f"{np.median(dlp):.3g}"),
                     "fp32_reference_abs_diff_max": float(f"{dlp.max():.3g}")},
        "greedy": {"tokens": r64.greedy, "margins": [[float(f"{m:.4g}") for m in ms] for ms in r64.margins],
                   "fp32_reference_agrees_for_steps": greedy_agree},
        "reference_fp32_vs_fp64": {
            "positions": len(errs), "positions_with_selection_flip": len(flipped),
            "selection_rows_differing": sel_rows_diff, "selection_rows": sel_rows,
            "rel_err_median": float(f"{errs_t.median():.3g}"), "rel_err_p99": float(f"{errs_t.quantile(0.99):.3g}"),
            "rel_err_max": float(f"{errs_t.max():.3g}"),
            "rel_err_max_without_flipped_positions": float(f"{clean_t.max():.3g}") if len(clean_t) else None},
        "seconds": {"prefill_fp64": round(r64.prefill_s, 2), "prefill_fp32": round(r32.prefill_s, 2),
                    "decode_fp32_per_step": round(r32.decode_s / max(1, N_GREEDY - 1), 4)},
    }
    with open(os.path.join(out_dir, name, "run.json"), "w") as f:
        json.dump(meta, f, separators=(",", ":"))
        f.write("\n")
    return meta


def golden_for(model_dir: str, out_dir: str, name: str, hashes: dict, command: str, runs=RUNS, log=print):
    torch.manual_seed(0)
    m64, cfg = load_model(model_dir, dtype=torch.float64)
    m32, _ = load_model(model_dir, dtype=torch.float32)
    prompts = make_prompts(cfg.vocab_size)
    msa_layers = [i for i, m in enumerate(cfg.msa_layers) if m]
    pdir = os.path.join(out_dir, name)
    if os.path.isdir(pdir):
        shutil.rmtree(pdir)
    os.makedirs(pdir)
    manifest = {"format_version": FORMAT_VERSION, "name": name, "command": command, "checkpoint_sha256": hashes,
                "block_size": cfg.block_size, "topk_blocks": cfg.topk_blocks, "vocab_size": cfg.vocab_size,
                "moe_activation_quant": cfg.moe_activation_quant,
                "msa_layers": msa_layers, "prompts": prompts, "n_greedy": N_GREEDY, "runs": [], "summary": {}}
    results = {}
    for mode, kv, method in runs:
        rname = f"{mode}-{kv}-{method}"
        rt = Runtime(mode=mode, kv_dtype=kv, topk_method=method)
        t = time.time()
        r64, r32 = run_pair(m64, m32, prompts, rt, range(cfg.num_layers))
        meta = write_run(pdir, rname, prompts, rt, r64, r32, msa_layers, cfg.topk_blocks, cfg.block_size)
        results[rname] = r64
        manifest["runs"].append(rname)
        log(f"{name}/{rname}: {len(meta['logits']['rows'])} logit rows, fp32-vs-fp64 "
            f"{meta['reference_fp32_vs_fp64']}, {time.time() - t:.0f}s")
    # exact vs q8kv4 (float64 both), over every prefill position, per KV dtype
    for kv in ("nvfp4", "fp8", "bf16"):
        a, b = results.get(f"exact-{kv}-keyed"), results.get(f"q8kv4-{kv}-keyed")
        if a is None or b is None:
            continue
        e = torch.tensor([rel_err(b.logits[k], a.logits[k]) for k in a.logits
                          if k[1] < len(prompts[k[0]])], dtype=torch.float64)
        manifest["summary"][f"q8kv4_vs_exact_{kv}"] = {"rel_err_median": float(f"{e.median():.3g}"),
                                                       "rel_err_p99": float(f"{e.quantile(0.99):.3g}"),
                                                       "rel_err_max": float(f"{e.max():.3g}")}
    for kv in ("fp8", "nvfp4"):  # quantised KV against BF16 KV (exact mode, float64)
        a, b = results.get("exact-bf16-keyed"), results.get(f"exact-{kv}-keyed")
        if a is None or b is None:
            continue
        e = torch.tensor([rel_err(b.logits[k], a.logits[k]) for k in a.logits
                          if k[1] < len(prompts[k[0]])], dtype=torch.float64)
        manifest["summary"][f"exact_{kv}_vs_exact_bf16_kv"] = {"rel_err_median": float(f"{e.median():.3g}"),
                                                               "rel_err_max": float(f"{e.max():.3g}")}
    with open(os.path.join(pdir, "manifest.json"), "w") as f:
        json.dump(manifest, f, separators=(",", ":"))
        f.write("\n")


def write_summary(out_dir: str):
    """SUMMARY.md: what the goldens hold and the reference's own float32-vs-float64 differences per run."""
    lines = ["# Parity goldens: summary", "",
             "Written by `tools/reference/gen_parity_goldens.py`; format in `tools/reference/README.md`.",
             "Relative error of a logits row = max |a - b| / max |b|; statistics over every prompt position "
             "(4500 per run) of the reference run in float32 against the golden float64 run.", "",
             "| preset | run | logit rows | selection rows | fp32 vs fp64: median | p99 | max | max without own "
             "selection flip | positions with a selection flip | perplexity fp32/fp64 - 1 (max over prompts) | "
             "prefill s (fp32, 3 prompts) | decode s/step |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    extra = []
    for p in sorted(os.listdir(out_dir)):
        mp = os.path.join(out_dir, p, "manifest.json")
        if not os.path.exists(mp):
            continue
        man = json.load(open(mp))
        for rn in man["runs"]:
            meta = json.load(open(os.path.join(out_dir, p, rn, "run.json")))
            st, sec = meta["reference_fp32_vs_fp64"], meta["seconds"]
            lpm = meta["logprobs"]
            pd = max(abs(a / b - 1) for a, b in zip(lpm["perplexity_fp32_reference"], lpm["perplexity"]))
            lines.append(f"| {p} | {rn} | {len(meta['logits']['rows'])} | {len(meta['selections']['rows'])} | "
                         f"{st['rel_err_median']:.2g} | {st['rel_err_p99']:.2g} | {st['rel_err_max']:.2g} | "
                         f"{st['rel_err_max_without_flipped_positions']:.2g} | {st['positions_with_selection_flip']} | "
                         f"{pd:.2g} | {sec['prefill_fp32']} | {sec['decode_fp32_per_step']} |")
        for k, v in man["summary"].items():
            extra.append(f"| {p} | {k} | " + " | ".join(f"{a} {b:.2g}" for a, b in v.items()) + " |")
    lines += ["", "Differences between runs (float64, every prompt position):", "", "| preset | comparison | values |",
              "|---|---|---|"] + extra
    with open(os.path.join(out_dir, "SUMMARY.md"), "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--presets", default=",".join(CI_PRESETS))
    ap.add_argument("--model", help="a checkpoint directory instead of presets (needs --name)")
    ap.add_argument("--name")
    ap.add_argument("--out", default=os.path.join(HERE, "..", "..", "tests", "reference", "goldens"))
    ap.add_argument("--runs", help="comma-separated subset of run names, e.g. exact-bf16-keyed")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0 = leave torch's default)")
    ap.add_argument("--summary-only", action="store_true", help="only rewrite SUMMARY.md from existing goldens")
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    runs = RUNS
    if a.runs:
        want = set(a.runs.split(","))
        runs = [r for r in RUNS if f"{r[0]}-{r[1]}-{r[2]}" in want]
    out = os.path.abspath(a.out)
    if a.summary_only:
        write_summary(out)
        return
    try:
        commit = subprocess.run(["git", "-C", HERE, "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True).stdout.strip()
    except OSError:
        commit = ""
    if a.model:
        if not a.name:
            ap.error("--model needs --name")
        golden_for(a.model, out, a.name, {}, f"gen_parity_goldens.py --model {a.model} --name {a.name}", runs)
        return
    for p in a.presets.split(","):
        tmp = tempfile.mkdtemp(prefix=f"msaref-{p}-")
        try:
            hashes = generate(tmp, p)
            golden_for(tmp, out, p, hashes, f"tools/reference/gen_parity_goldens.py --presets {p} (at {commit})", runs)
        finally:
            shutil.rmtree(tmp)
    write_summary(out)


if __name__ == "__main__":
    main()
