#!/usr/bin/env python3
"""Regenerates docs/quality.md from the committed default model (one command, CPU; the defaults score 4 windows of
2048 tokens; on this shared 2-core machine about 13 minutes with -j2 --threads 1, about 22 serially):

  /usr/bin/python3 tools/train/quality.py -j2 --threads 1 [--msa build/msa] [--windows 4] [--out docs/quality.md]

What it measures (figures are computed by this script, never typed in):
- held-out perplexity by the C++ engine (`msa score`, exact numerics) on the first --windows windows of 2048
  tokens of the held-out documents (never trained on): MSA vs dense attention, NVFP4 vs FP8 vs BF16 KV cache, top-k
  variants, the no-QAT ablation (tools/train/ablations/noqat), Q8KV4 numerics, and 4096-token windows (2x the trained
  context);
- the same perplexity from the Python reference (tools/reference/msaref, keyed top-k, exact mode) on the same
  tokens: the C++ and PyTorch figures must agree within 0.5%;
- the DSpark drafter's acceptance length (greedy drafting verified greedily, PyTorch);
- chat recitation from memory: `Recite REF.` and `Continue: FIRST HALF` for well-known and random training verses,
  greedy, against the true text (needs tools/train/data/corpus_train.jsonl);
- sample generations by `msa generate` (plain text continuations and chat prompts rendered with the model's own
  chat template);
- the training loss curve (models/default/training/train_log.csv).
Raw results go to tools/train/quality.json.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import csv
import datetime
import difflib
import json
import math
import os
import random
import subprocess
import sys
import tempfile
import time

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
from msaref.checkpoint import load_model  # noqa: E402
from msaref.config import load_config  # noqa: E402
from msaref.model import Runtime  # noqa: E402
from msaref.runner import run, score as ref_score  # noqa: E402
from train_tokenizer import EOS  # noqa: E402


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def cpp_drafter(args) -> dict:
    """Speculative decoding in the C++ engine with the shipped drafter: `engine_bench --only spec` (greedy decoding of
    the held-out prompts of bench/engine/heldout_prompts.json with and without drafts; one thread, CPU time)."""
    bench = args.engine_bench or os.path.join(os.path.dirname(os.path.abspath(args.msa)), "bench", "engine",
                                               "engine_bench")
    if not os.path.exists(bench):
        log(f"no {bench}: the C++ drafter figures are left out")
        return {}
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "spec.json")
        subprocess.run([bench, "--only", "spec", "--model", args.model, "--prompts",
                        os.path.join(ROOT, "bench", "engine", "heldout_prompts.json"), "--out", out],
                       check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
        with open(out) as f:
            figs = {r["figure"].split("/", 1)[1]: r for r in json.load(f)}
    res = {"us_per_token_plain": figs["spec_off_us_per_token"]["value"], "runs": []}
    for k in (3, 7):
        acc = figs[f"spec_dspark_k{k}_acceptance_length"]
        res["runs"].append({"k": k, "acceptance_length": acc["value"],
                            "accepted_per_position": acc["accepted_per_position"],
                            "us_per_token": figs[f"spec_dspark_k{k}_us_per_token"]["value"],
                            "speedup": figs[f"spec_dspark_k{k}_speedup"]["value"],
                            "tokens_equal": acc["prompts_with_tokens_equal_to_plain_decoding"],
                            "propose_us": acc["drafter_propose_us_per_call"]})
    res["prompts"] = len(json.load(open(os.path.join(ROOT, "bench", "engine", "heldout_prompts.json")))["prompts"])
    log("C++ drafter: " + ", ".join(f"k={r['k']} acceptance {r['acceptance_length']:.2f} speed-up "
                                    f"{r['speedup']:.2f}x" for r in res["runs"]))
    return res


def msa_score(msa: str, model_dir: str, ids: list, flags: list) -> float:
    """Sum of -log p over tokens 1.. of one window, by `msa score`."""
    with tempfile.NamedTemporaryFile("w", prefix="msa_quality_ids_", suffix=".txt") as f:  # one per call (--jobs)
        f.write(" ".join(str(int(t)) for t in ids))
        f.flush()
        r = subprocess.run([msa, "score", "--model", model_dir, "--ids", f.name, "--no-per-token", *flags],
                           capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"msa score {' '.join(flags)} failed: {r.stderr.strip()[-500:]}")
    return float(json.loads(r.stdout)["nll_sum"])


def heldout_windows(held: np.ndarray, T: int, n: int) -> list:
    return [held[i * T:(i + 1) * T].astype(np.int64).tolist() for i in range(min(n, len(held) // T))]


@torch.no_grad()
def acceptance_length(ref, target: TinyM3, drafter: DSparkDrafter, held: np.ndarray, n_prompts: int,
                      prompt_len: int, new_tokens: int) -> dict:
    """Greedy speculative decoding, simulated exactly on the target's greedy trajectory: the reference decodes the
    greedy continuation S of each held-out prompt; one target forward over S gives the taps and the target's greedy
    token g[t] after every position; the drafter drafts a block at every anchor position of the continuation. A
    round anchored at position n accepts drafts while they equal both S and g, then the target's own token follows:
    1 + accepted tokens per target step (dspark.md's acceptance length); the next round's anchor is that token."""
    dc = drafter.c
    Bk = dc.block_size
    mode = Mode(sparse=True, kv="nvfp4", w4a4=True, w4a4_weights=False)
    stride = (len(held) - prompt_len - 1) // n_prompts
    prompts = [held[p * stride:p * stride + prompt_len].astype(np.int64).tolist() for p in range(n_prompts)]
    rr = run(ref, prompts, Runtime(mode="exact", topk_method="keyed"), n_greedy=new_tokens + Bk + 1,
             keep=lambda s, p: False)
    steps, produced, mismatch = 0, 0, 0
    per_pos = np.zeros(Bk)
    for i, pr in enumerate(prompts):
        S = torch.tensor(pr + rr.greedy[i])
        stats = {}
        h = target(S[None], mode, taps=tuple(dc.target_layer_ids), stats=stats)
        g = target.logits(h).argmax(-1)[0]
        mismatch += int((g[prompt_len - 1:-1] != S[prompt_len:]).sum())
        taps = torch.cat([stats["taps"][li] for li in dc.target_layer_ids], -1)
        anchors = torch.arange(prompt_len, prompt_len + new_tokens)
        prev = torch.zeros(1, len(anchors), Bk, dtype=torch.long)
        u = drafter(taps, target.model.embed_tokens, target.lm_head, S[anchors][None], prev, anchors)
        u = u[0] - drafter.markov_head(prev)[0].float()  # [M, Bk, V] without the Markov term
        x = S[anchors]
        drafts = []
        for j in range(Bk):  # greedy left to right: the Markov term uses the previous draft
            x = (u[:, j] + drafter.markov_head(x).float()).argmax(-1)
            drafts.append(x)
        D = torch.stack(drafts, 1)
        n = prompt_len
        while n < prompt_len + new_tokens:
            acc = 0
            while acc < Bk and int(D[n - prompt_len, acc]) == int(S[n + 1 + acc]) == int(g[n + acc]):
                per_pos[acc] += 1
                acc += 1
            steps += 1
            produced += 1 + acc
            n += 1 + acc
    return {"acceptance_length": produced / steps, "target_steps": steps, "tokens": produced,
            "accepted_per_position": (per_pos / steps).round(3).tolist(), "prompts": n_prompts,
            "prompt_tokens": prompt_len, "new_tokens": new_tokens, "block_size": Bk,
            "reference_vs_training_model_greedy_mismatches": mismatch}


def generate(msa: str, model_dir: str, tok, ids: list, n: int, temperature: float, seed: int) -> str:
    r = subprocess.run([msa, "generate", "--model", model_dir, "--prompt-ids", " ".join(map(str, ids)),
                        "--max-tokens", str(n), "--temperature", str(temperature), "--top-k", "40", "--top-p", "0.95",
                        "--seed", str(seed)], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"msa generate failed: {r.stderr.strip()[-500:]}")
    out = [int(t) for t in r.stdout.split()]
    return tok.decode(out)


# Well-known verses of the training books (the held-out books are Ruth, Ecclesiastes, Jonah, Mark, Philippians, Jude)
FAMOUS = ("Genesis 1:1", "John 3:16", "Psalms 23:1", "John 11:35", "Proverbs 3:5", "Exodus 20:13", "Romans 6:23",
          "Matthew 5:9", "Isaiah 40:31", "1 Corinthians 13:4", "John 1:1", "Psalms 119:105", "Proverbs 16:18",
          "Matthew 6:9", "Hebrews 11:1", "Luke 2:14")


def training_verses(corpus: str, n_random: int, seed: int = 7) -> list:
    """[(reference, text)]: FAMOUS, then n_random verses drawn with a fixed seed, all from the training split."""
    from prepare_data import kjv_chapters, read_docs
    verses = {}
    for d in read_docs(corpus):
        if d["group"].startswith("kjv/"):
            for book, chap, vs in kjv_chapters(d["text"]):
                for num, text in vs:
                    verses[f"{book} {chap}:{num}"] = text
    rng = random.Random(seed)
    refs = [r for r in FAMOUS if r in verses]
    refs += rng.sample(sorted(set(verses) - set(refs)), n_random)
    return [(r, verses[r]) for r in refs]


def similarity(a: str, b: str) -> float:
    """Word-level similarity in [0, 1] (difflib's ratio of the two word sequences)."""
    return difflib.SequenceMatcher(None, a.split(), b.split(), autojunk=False).ratio()


def leading_words(a: str, b: str) -> int:
    """How many words a and b share from their starts."""
    n = 0
    for x, y in zip(a.split(), b.split()):
        if x != y:
            break
        n += 1
    return n


def recitation(args, tok, tmpl, tc, verses) -> dict:
    """Chat recitation from memory, greedy, thinking disabled: "Recite REF." against the verse, and "Continue: first
    half" against the second half. Exact = the same words; leading = words right from the start; similarity = word-level difflib ratio (shared
    function words give unrelated KJV-style text about 0.05-0.1)."""
    eos = tc["eos_token"]

    def ask(q):
        p = tmpl.render(messages=[{"role": "user", "content": q}], add_generation_prompt=True,
                        thinking_mode="disabled", tools=None, bos_token=tc["bos_token"])
        out = generate(args.msa, args.model, tok, tok.encode(p), 96, 0.0, 0)
        return out[:-len(eos)] if out.endswith(eos) else out

    jobs = []
    for ref, text in verses:
        words = text.split()
        half = len(words) // 2
        jobs.append(("recite", ref, f"Recite {ref}.", text))
        if half >= 3:
            jobs.append(("continue", ref, "Continue: " + " ".join(words[:half]), " ".join(words[half:])))
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as ex:
        answers = list(ex.map(lambda j: ask(j[2]), jobs))
    res = {"verses": len(verses), "famous": list(FAMOUS), "items": []}
    for (kind, ref, q, truth), a in zip(jobs, answers):
        a = a.strip()
        if kind == "recite" and a.split(" ", 1)[0].isdigit():  # a leading verse number is fine
            a = a.split(" ", 1)[1] if " " in a else ""
        res["items"].append({"kind": kind, "ref": ref, "prompt": q, "truth": truth, "answer": a,
                             "exact": a.split() == truth.split(), "leading_words": leading_words(a, truth),
                             "similarity": similarity(a, truth)})
    for kind in ("recite", "continue"):
        it = [x for x in res["items"] if x["kind"] == kind]
        res[kind] = {"n": len(it), "exact": sum(x["exact"] for x in it),
                     "mean_leading_words": sum(x["leading_words"] for x in it) / max(1, len(it)),
                     "mean_similarity": sum(x["similarity"] for x in it) / max(1, len(it))}
    return res


def loss_curve(path: str, every: int) -> list:
    if not os.path.exists(path):
        return []
    with open(path) as f:
        rows = list(csv.DictReader(f))
    keep = [r for i, r in enumerate(rows) if r["heldout_loss"] or i % every == 0 or r["phase"] == "final"]
    return keep


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--msa", default=os.path.join(ROOT, "build", "msa"))
    ap.add_argument("--model", default=os.path.join(ROOT, "models", "default"))
    ap.add_argument("--noqat", default=os.path.join(HERE, "ablations", "noqat"))
    ap.add_argument("--heldout", default=os.path.join(HERE, "data", "heldout.bin"))
    ap.add_argument("--windows", type=int, default=4, help="held-out windows of 2048 tokens")
    ap.add_argument("--long-windows", type=int, default=1, help="held-out windows of 4096 tokens")
    ap.add_argument("--threads", type=int, default=2, help="threads of each `msa score` run")
    ap.add_argument("-j", "--jobs", type=int, default=1, help="`msa` runs at a time (the variants run in "
                    "parallel; on a shared 2-core machine use -j2 with --threads 1)")
    ap.add_argument("--corpus", default=os.path.join(HERE, "data", "corpus_train.jsonl"),
                    help="training corpus (the verses of the recitation check)")
    ap.add_argument("--recite-random", type=int, default=16, help="random training verses in the recitation check "
                    "(besides the well-known ones)")
    ap.add_argument("--accept-prompts", type=int, default=8)
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "quality.md"))
    ap.add_argument("--json", default=os.path.join(HERE, "quality.json"))
    ap.add_argument("--quick", action="store_true", help="fewer variants (for a smoke test)")
    ap.add_argument("--report-only", action="store_true", help="rewrite --out from the figures in --json")
    ap.add_argument("--engine-bench", default="", help="engine_bench binary (default: next to --msa)")
    ap.add_argument("--update-cpp-drafter", action="store_true",
                    help="measure only the C++ drafter figures, store them in --json and rewrite --out")
    args = ap.parse_args()
    if args.update_cpp_drafter:
        with open(args.json) as f:
            res = json.load(f)
        res["drafter_cpp"] = cpp_drafter(args)
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)
            f.write("\n")
        args.report_only = True
    if args.report_only:
        with open(args.json) as f:
            write_report(args, json.load(f), load_config(args.model))
        return
    t0 = time.time()
    if not os.path.exists(args.heldout):
        sys.exit(f"quality: {args.heldout} missing: run tools/train/build_corpus.py and prepare_data.py")
    held = np.fromfile(args.heldout, dtype=np.uint16)
    tok = ByteLevelBPE.from_hf_json(os.path.join(args.model, "tokenizer.json"))
    cfg = load_config(args.model)
    T = 2048
    wins = heldout_windows(held, T, args.windows)
    long_wins = heldout_windows(held, 2 * T, args.long_windows)
    n_tok = sum(len(w) - 1 for w in wins)
    res = {"date": datetime.date.today().isoformat(), "windows": len(wins), "window_tokens": T,
           "scored_tokens": n_tok, "long_windows": len(long_wins), "variants": [], "parity": []}
    thr = ["--threads", str(args.threads), "--activations", "exact"]
    k = cfg.topk_blocks
    variants = [
        ("default: MSA top-%d, NVFP4 KV (shipped)" % k, args.model, [], wins),
        ("dense attention, NVFP4 KV", args.model, ["--dense-attention"], wins),
        ("MSA top-%d, FP8 KV" % k, args.model, ["--kv-cache-dtype", "fp8"], wins),
        ("MSA top-%d, BF16 KV" % k, args.model, ["--kv-cache-dtype", "bf16"], wins),
        ("dense attention, BF16 KV", args.model, ["--dense-attention", "--kv-cache-dtype", "bf16"], wins),
    ]
    if not args.quick:
        variants += [(f"MSA top-{kk}, NVFP4 KV", args.model, ["--topk-blocks", str(kk)], wins)
                     for kk in (1, 2, 8) if kk != k]
        variants += [("MSA top-%d, NVFP4 KV, Q8KV4 numerics" % k, args.model, ["--numerics", "q8kv4"], wins)]
        if os.path.isdir(args.noqat):
            variants += [("no-QAT ablation: MSA top-%d, NVFP4 KV" % k, args.noqat, [], wins),
                         ("no-QAT ablation: MSA top-%d, BF16 KV" % k, args.noqat, ["--kv-cache-dtype", "bf16"],
                          wins),
                         ("no-QAT ablation: dense attention, BF16 KV", args.noqat,
                          ["--dense-attention", "--kv-cache-dtype", "bf16"], wins)]
        variants += [("4096-token windows: MSA top-%d, NVFP4 KV" % k, args.model, [], long_wins),
                     ("4096-token windows: dense attention, NVFP4 KV", args.model, ["--dense-attention"], long_wins)]
    def score_variant(v):
        name, mdir, flags, ws = v
        t = time.time()
        nll = sum(msa_score(args.msa, mdir, w, flags + thr) for w in ws)
        n = sum(len(w) - 1 for w in ws)
        log(f"{name:55s} ppl {math.exp(nll / n):9.3f}  ({time.time() - t:.0f} s)")
        return {"variant": name, "model": os.path.relpath(mdir, ROOT), "flags": flags, "tokens": n,
                "nll": nll / n, "ppl": math.exp(nll / n)}

    with concurrent.futures.ThreadPoolExecutor(args.jobs) as ex:  # results in the order of `variants`
        res["variants"] = list(ex.map(score_variant, variants))

    # C++ vs the Python reference on the same tokens
    ref, _ = load_model(args.model)
    for name, rt, flags in (("MSA top-%d, NVFP4 KV (shipped)" % k, Runtime(mode="exact", topk_method="keyed"), []),
                            ("dense attention, BF16 KV", Runtime(mode="exact", kv_dtype="bf16", force_dense=True),
                             ["--dense-attention", "--kv-cache-dtype", "bf16"])):
        t = time.time()
        py = -sum(sum(ref_score(ref, w, rt)) for w in wins[:max(1, len(wins) // 2)])
        cpp = sum(msa_score(args.msa, args.model, w, flags + thr) for w in wins[:max(1, len(wins) // 2)])
        n = sum(len(w) - 1 for w in wins[:max(1, len(wins) // 2)])
        res["parity"].append({"variant": name, "tokens": n, "ppl_cpp": math.exp(cpp / n),
                              "ppl_pytorch": math.exp(py / n),
                              "rel_diff": abs(math.exp(cpp / n) / math.exp(py / n) - 1)})
        log(f"parity {name}: C++ {math.exp(cpp / n):.4f} PyTorch {math.exp(py / n):.4f} ({time.time() - t:.0f} s)")

    # drafter
    ddir = os.path.join(args.model, "drafter")
    if os.path.isdir(ddir):
        with open(os.path.join(ddir, "config.json")) as f:
            dj = json.load(f)
        dc = DrafterConfig(hidden_size=dj["hidden_size"], num_layers=dj["num_hidden_layers"],
                           num_heads=dj["num_attention_heads"], num_kv_heads=dj["num_key_value_heads"],
                           head_dim=dj["head_dim"], rotary_dim=dj["rotary_dim"], rope_theta=dj["rope_theta"],
                           rms_norm_eps=dj["rms_norm_eps"], intermediate_size=dj["intermediate_size"],
                           target_layer_ids=dj["target_layer_ids"], block_size=dj["dspark_block_size"],
                           sliding_window=dj["sliding_window"], markov_rank=dj["markov_head"]["rank"],
                           mask_token_id=dj["mask_token_id"], vocab_size=dj["vocab_size"])
        d = DSparkDrafter(dc)
        d.load_state_dict(read_drafter_state(ddir))
        d.eval()
        t = time.time()
        res["drafter"] = acceptance_length(ref, tiny_from_dir(args.model), d, held, args.accept_prompts, 256, 128)
        res["drafter"]["parameters"] = sum(p.numel() for p in d.parameters())
        log(f"drafter acceptance {res['drafter']['acceptance_length']:.3f} ({time.time() - t:.0f} s)")
        res["drafter_cpp"] = cpp_drafter(args)

    # samples
    with open(os.path.join(args.model, "tokenizer_config.json")) as f:
        tc = json.load(f)
    import jinja2
    tmpl = jinja2.Environment().from_string(tc["chat_template"])
    prompts = [("text", "Genesis 1\n1 In the beginning"), ("text", "Psalms 23\n1 The LORD is my shepherd"),
               ("text", "Q: What is a hacker?\nA:")]
    chats = [("Recite John 3:16.", "enabled"), ("Tell me a fortune.", "disabled"),
             ("What does the Bible say about wisdom?", "disabled"), ("Recite Genesis 1:1.", "disabled"),
             ("Continue: For God so loved the world,", "disabled"),
             ("What does the book of Proverbs say about wisdom?", "enabled")]
    res["samples"] = []
    for i, (kind, p) in enumerate(prompts):
        res["samples"].append({"kind": "continuation", "prompt": p,
                               "output": generate(args.msa, args.model, tok, tok.encode(p), 80, 0.8, i)})
    for i, (q, think) in enumerate(chats):
        p = tmpl.render(messages=[{"role": "user", "content": q}], add_generation_prompt=True,
                        thinking_mode=think, tools=None, bos_token=tc["bos_token"])
        res["samples"].append({"kind": f"chat (thinking {think})", "prompt": q,
                               "output": generate(args.msa, args.model, tok, tok.encode(p), 120, 0.7, 10 + i)})
    if os.path.exists(args.corpus):
        t = time.time()
        res["recitation"] = recitation(args, tok, tmpl, tc, training_verses(args.corpus, args.recite_random))
        log(f"recitation: {res['recitation']['recite']} {res['recitation']['continue']} ({time.time() - t:.0f} s)")
    res["seconds"] = time.time() - t0
    with open(args.json, "w") as f:
        json.dump(res, f, indent=1)
    write_report(args, res, cfg)
    log(f"wrote {args.out} and {args.json} in {res['seconds']:.0f} s")


def _mostly_non_words(text: str) -> bool:
    """True when under 70% of a text's non-space characters are letters (a sample that left prose)."""
    chars = [c for c in text if not c.isspace()]
    return bool(chars) and sum(c.isalpha() for c in chars) < 0.7 * len(chars)


def write_report(args, res, cfg):
    V = {v["variant"]: v for v in res["variants"]}
    k = cfg.topk_blocks
    ship = V["default: MSA top-%d, NVFP4 KV (shipped)" % k]
    dense = V["dense attention, NVFP4 KV"]
    rel = lambda a, b: 100.0 * (a["ppl"] / b["ppl"] - 1)  # noqa: E731
    summ_path = os.path.join(args.model, "training", "summary.json")
    summ = json.load(open(summ_path)) if os.path.exists(summ_path) else {}
    L = []
    L.append("# Quality of the default model")
    L.append("")
    L.append("Generated by `/usr/bin/python3 tools/train/quality.py` from the committed `models/default` "
             f"({res['date']}); raw figures in `tools/train/quality.json`. Do not edit by hand.")
    L.append("")
    n_params = summ.get("parameters")
    L.append("## The model")
    L.append(f"- MiniMax-M3.1 structure at small size: {cfg.num_layers} layers (layer 0 dense attention + dense MLP, "
             f"layers 1-{cfg.num_layers - 1} MSA + MoE), hidden {cfg.hidden_size}, {cfg.num_heads} query / "
             f"{cfg.num_kv_heads} KV heads x {cfg.head_dim}, {cfg.num_experts} experts top-{cfg.top_k_experts} + "
             f"1 shared, MSA top-{k} of {cfg.block_size}-token blocks (sparse beyond {k * cfg.block_size} tokens), "
             f"vocabulary {cfg.vocab_size}" + (f", {n_params / 1e6:.1f} M parameters" if n_params else "") + ".")
    L.append("- Weights: routed experts NVFP4 (ModelOpt layout, W4A4 activations as M3.1), router FP32, the rest "
             "BF16; NVFP4 KV cache for K, V and index keys by default.")
    if summ.get("target"):
        t = summ["target"]
        L.append(f"- Trained by `tools/train/gpu_run.sh` on {summ.get('gpu', summ.get('device'))} (torch "
                 f"{summ.get('torch')}): {t['steps']} steps of {summ['args']['batch']} x {summ['args']['seq']} "
                 f"tokens in {t['seconds']:.0f} s; dense warm-up to step {t['phase_steps'][0]}, sparse attention "
                 f"with the indexer's KL objective to step {t['phase_steps'][1]}, then QAT (NVFP4 K/V/index-K and "
                 f"W4A4 NVFP4 experts). Replay the same schedule by steps with `train.py ... {t['reproduce']}` "
                 "(fixed seeds and batches; GPU kernels are not bit-deterministic).")
        L.append(f"- The GPU run's own held-out evaluation (PyTorch training model, BF16 autocast, "
                 f"{summ['args']['eval_windows']} windows of {summ['args']['seq'] + 1} tokens): loss "
                 f"{t['final_heldout_loss']:.4f} with NVFP4 KV and W4A4 experts, perplexity "
                 f"{math.exp(t['final_heldout_loss']):.2f}"
                 + (f"; the no-QAT ablation's, unquantised, {summ['noqat']['final_heldout_loss']:.4f}"
                    if summ.get("noqat") else "")
                 + ". The figures below are the engine's, on fewer windows, so they differ.")
    data = summ.get("data", {})
    if "train_chat_tokens" in data:
        L.append(f"- Training data (`tools/train/prepare_data.py`): {data['train_tokens'] / 1e6:.2f} M tokens, of which "
                 f"{data['train_chat_tokens'] / 1e6:.2f} M are {data['train_chat_examples']} synthetic chat exchanges "
                 "rendered with the model's chat template (KJV: recite a verse or passage, continue a verse, a verse "
                 "about a theme; fortunes), all made from the training split"
                 + (f"; {data['dropped_digit_heavy_fortunes']} digit-heavy fortunes left out"
                    if "dropped_digit_heavy_fortunes" in data else "")
                 + f". Held-out: {data['heldout_tokens']} tokens of {data['heldout_documents']} held-out documents.")
    L.append("")
    L.append("## Held-out perplexity (C++ engine, `msa score`)")
    L.append(f"{res['windows']} windows of {res['window_tokens']} tokens from the held-out documents "
             f"({res['scored_tokens']} scored tokens; each window scored from its own start), exact numerics and "
             "exact activations unless the row says otherwise.")
    L.append("")
    L.append("| variant | tokens | perplexity | vs shipped |")
    L.append("|---|---:|---:|---:|")
    for v in res["variants"]:
        same_len = v["tokens"] == ship["tokens"]
        L.append(f"| {v['variant']} | {v['tokens']} | {v['ppl']:.3f} | "
                 f"{('%+.2f%%' % rel(v, ship)) if same_len else '-'} |")
    L.append("")
    L.append("## C++ vs PyTorch")
    L.append("The same windows (first half) scored by the independent Python reference (`tools/reference/msaref`, "
             "keyed top-k, exact mode, FP32):")
    L.append("")
    L.append("| variant | tokens | C++ | PyTorch | relative difference |")
    L.append("|---|---:|---:|---:|---:|")
    for p in res["parity"]:
        L.append(f"| {p['variant']} | {p['tokens']} | {p['ppl_cpp']:.4f} | {p['ppl_pytorch']:.4f} | "
                 f"{100 * p['rel_diff']:.4f}% {'(within 0.5%)' if p['rel_diff'] < 0.005 else '(OVER 0.5%)'} |")
    L.append("")
    if "drafter" in res:
        d = res["drafter"]
        L.append("## DSpark drafter")
        L.append(f"{d['parameters'] / 1e6:.2f} M parameters, block of {d['block_size']} drafted positions. Greedy "
                 f"drafting verified greedily over {d['new_tokens']} generated tokens after each of {d['prompts']} "
                 f"held-out prompts of {d['prompt_tokens']} tokens (PyTorch, simulated exactly on the target's "
                 f"greedy continuation): **acceptance length "
                 f"{d['acceptance_length']:.2f}** tokens per target step (the target's own token included), "
                 f"{d['target_steps']} target steps. Accepted fraction by draft position: "
                 f"{', '.join('%.2f' % a for a in d['accepted_per_position'])}.")
        L.append("")
        c = res.get("drafter_cpp") or {}
        if c.get("runs"):
            L.append(f"In the C++ engine (`engine_bench --only spec`: greedy decoding of {c['prompts']} held-out "
                     f"prompts of `bench/engine/heldout_prompts.json`, 128 tokens each, one request at a time, one "
                     f"thread, CPU time per decoded token; plain decoding {c['us_per_token_plain']:.0f} us/token):")
            L.append("")
            L.append("| drafts per step | acceptance length | accepted fraction by position | us/token | speed-up "
                     "| drafter us per proposal | prompts with the same tokens as plain decoding |")
            L.append("|---:|---:|---|---:|---:|---:|---:|")
            for r in c["runs"]:
                steps = r["accepted_per_position"]
                total = max(1.0, sum(steps) / max(1e-9, r["acceptance_length"] - 1))
                L.append(f"| {r['k']} | {r['acceptance_length']:.2f} | "
                         f"{', '.join('%.2f' % (a / total) for a in steps)} | {r['us_per_token']:.0f} | "
                         f"{r['speedup']:.2f}x | {r['propose_us']:.0f} | {r['tokens_equal']} of {c['prompts']} |")
            L.append("")
        elif c == {} and "drafter_cpp" in res:
            L.append("The C++ engine's figures were not measured (no engine_bench binary).")
            L.append("")
    curve = loss_curve(os.path.join(args.model, "training", "train_log.csv"), 10)
    if curve:
        L.append("## Training loss curve")
        L.append("From `models/default/training/train_log.csv` (every logged held-out evaluation; training loss is "
                 "the batch's mean token NLL in nats).")
        L.append("")
        L.append("| step | phase | lr | train loss | indexer KL | held-out loss |")
        L.append("|---:|---|---:|---:|---:|---:|")
        for r in curve:
            L.append(f"| {r['step']} | {r['phase']} | {r['lr']} | {r['loss']} | {r['indexer_kl']} | "
                     f"{r['heldout_loss']} |")
        L.append("")
    rec = res.get("recitation")
    if rec:
        L.append("## Chat recitation from memory")
        L.append(f"{rec['verses']} verses of the training books ({len(rec['famous'])} well-known ones, the rest drawn "
                 "with a fixed seed), asked through the chat template with thinking disabled and answered greedily "
                 "by `msa generate`: `Recite REF.` against the verse, and `Continue: FIRST HALF` against the second "
                 "half. Exact: the same words; leading words: words right from the start of the answer; similarity: "
                 "word-level difflib ratio (1 = identical; unrelated KJV-style text scores about 0.05-0.1 from shared "
                 "function words).")
        L.append("")
        L.append("| task | asked | exact | mean leading words | mean similarity |")
        L.append("|---|---:|---:|---:|---:|")
        for kind in ("recite", "continue"):
            L.append(f"| {kind} | {rec[kind]['n']} | {rec[kind]['exact']} | {rec[kind]['mean_leading_words']:.2f} | "
                     f"{rec[kind]['mean_similarity']:.2f} |")
        L.append("")
        L.append("| prompt | answer | leading words | similarity |")
        L.append("|---|---|---:|---:|")
        for x in rec["items"][:12]:
            cell = lambda t: t.replace("|", "/").replace("\n", " ")[:160]  # noqa: E731
            L.append(f"| {cell(x['prompt'])} | {cell(x['answer'])} | {x['leading_words']} | {x['similarity']:.2f} |")
        L.append("")
    with open(os.path.join(args.model, "tokenizer_config.json")) as f:
        eos = json.load(f)["eos_token"]
    L.append("## Samples (`msa generate`, temperature 0.8/0.7, top-k 40, top-p 0.95)")
    L.append(f"Each sample as generated, up to its length limit or the end-of-sequence token `{eos}` "
             "(shown as `<end of sequence>`).")
    for s in res["samples"]:
        out = s["output"]
        if out.endswith(eos):
            out = out[:-len(eos)] + "<end of sequence>"
        L.append("")
        L.append(f"**{s['kind']}**: `{s['prompt']!r}`")
        L.append("")
        L.append("```")
        L.append(out.replace("```", "'''"))
        L.append("```")
    L.append("")
    L.append("## What is good and what is not")
    good, bad = [], []
    par_ok = all(p["rel_diff"] < 0.005 for p in res["parity"])
    (good if par_ok else bad).append(
        "The C++ engine and the independent PyTorch reference agree on held-out perplexity "
        + ("within 0.5%." if par_ok else "only to %.3f%%: over the 0.5%% bound." %
           (100 * max(p["rel_diff"] for p in res["parity"]))))
    d_ms = rel(ship, dense)
    (good if d_ms < 2.0 else bad).append(
        f"MSA (top-{k} blocks) changes perplexity by {d_ms:+.2f}% against dense attention at 2048 tokens (both "
        "with NVFP4 KV), where each query "
        f"reads at most {k * cfg.block_size} of up to 2048 keys.")
    if "MSA top-%d, BF16 KV" % k in V:
        kvq = rel(ship, V["MSA top-%d, BF16 KV" % k])
        fp8 = rel(V["MSA top-%d, FP8 KV" % k], V["MSA top-%d, BF16 KV" % k])
        (good if kvq < 1.0 else bad).append(f"The NVFP4 KV cache costs {kvq:+.2f}% perplexity against BF16 KV "
                                            f"(FP8: {fp8:+.2f}%).")
    nq = V.get("no-QAT ablation: MSA top-%d, NVFP4 KV" % k)
    if nq:
        gain = rel(nq, ship)
        (good if gain > 0 else bad).append(
            f"Quantisation-aware training: the ablation trained for the same steps without fake quantisation is "
            f"{gain:+.2f}% worse in the shipped NVFP4 configuration; with a BF16 KV cache it is still "
            f"{rel(V['no-QAT ablation: MSA top-%d, BF16 KV' % k], V['MSA top-%d, BF16 KV' % k]):+.2f}% worse, "
            "since both checkpoints ship NVFP4 (W4A4) experts and only the QAT model was trained with them.")
    tk = [(kk, V["MSA top-%d, NVFP4 KV" % kk]) for kk in (1, 2, 8) if "MSA top-%d, NVFP4 KV" % kk in V]
    if tk:
        (good if all(rel(v, ship) > -0.5 for _, v in tk) else bad).append(
            f"Top-k of the trained top-{k}: " + ", ".join(f"top-{kk} {rel(v, ship):+.2f}%" for kk, v in tk)
            + f" against top-{k}; the indexer's selection is tuned to the budget it was trained with.")
    lw = V.get("4096-token windows: MSA top-%d, NVFP4 KV" % k)
    lwd = V.get("4096-token windows: dense attention, NVFP4 KV")
    if lw and lwd:
        (good if lw["ppl"] <= lwd["ppl"] * 1.02 else bad).append(
            f"At 4096 tokens (twice the trained context) MSA gives {lw['ppl']:.3f} and dense attention "
            f"{lwd['ppl']:.3f}.")
    if "drafter" in res:
        a = res["drafter"]["acceptance_length"]
        dsum = summ.get("drafter", {})
        (good if a >= 2.0 else bad).append(
            f"The drafter's greedy acceptance length is {a:.2f} (its first draft matches the target's greedy token "
            f"{100 * res['drafter']['accepted_per_position'][0]:.0f}% of the time)"
            + (f"; it was trained for {dsum['steps']} steps ({dsum['seconds']:.0f} s)" if dsum else "") + ".")
    runs = (res.get("drafter_cpp") or {}).get("runs", [])
    if runs:
        best = max(runs, key=lambda r: r["speedup"])
        (good if best["speedup"] > 1.0 else bad).append(
            f"In the C++ engine speculative decoding is lossless (greedy tokens identical on "
            f"{min(r['tokens_equal'] for r in runs)} of {res['drafter_cpp']['prompts']} prompts) with acceptance "
            f"length {', '.join('%.2f' % r['acceptance_length'] for r in runs)} at "
            f"{', '.join(str(r['k']) for r in runs)} drafts, but its best CPU speed-up is {best['speedup']:.2f}x: "
            + f"one proposal costs {best['propose_us']:.0f} us against {res['drafter_cpp']['us_per_token_plain']:.0f} "
              f"us per plainly decoded token.")
    texts = [smp["output"][:-len(eos)] if smp["output"].endswith(eos) else smp["output"] for smp in res["samples"]]
    degenerate = [t for t in texts if _mostly_non_words(t)]
    empty = [smp for smp, t in zip(res["samples"], texts) if not t.strip()]
    if empty:
        bad.append(f"{len(empty)} of {len(res['samples'])} samples end at once with the end-of-sequence token "
                   f"(prompt {empty[0]['prompt']!r}).")
    if degenerate:
        bad.append(f"{len(degenerate)} of {len(res['samples'])} samples drift into strings of digits or symbols "
                   f"(e.g. {degenerate[0][:60]!r}).")
    else:
        good.append(f"None of the {len(res['samples'])} samples drifts into strings of digits or symbols.")
    if rec:
        r, c = rec["recite"], rec["continue"]
        line = (f"Chat recitation from memory (greedy): {r['exact']} of {r['n']} verses recited exactly (mean "
                f"similarity {r['mean_similarity']:.2f}), {c['exact']} of {c['n']} verses continued exactly "
                f"({c['mean_similarity']:.2f}).")
        (good if r["mean_similarity"] >= 0.5 else bad).append(
            line + ("" if r["mean_similarity"] >= 0.5 else " The model answers in the chat format with KJV-style "
                    "verses, but it has not memorised which verse a reference names: at 10 M parameters it "
                    "learns the style of the Bible, not its text."))
    n_tok = summ.get("data", {}).get("train_tokens", 0)
    bad.append(f"It is a {summ.get('parameters', 0) / 1e6:.0f} M-parameter model trained for minutes on "
               f"{n_tok / 1e6:.1f} M tokens of KJV, fortunes, the Jargon File and synthetic chat exchanges built "
               "from them: text has the style of its corpus, but facts, reasoning and long coherence are beyond it, "
               "and chat answers only imitate the few kinds of synthetic exchange it saw (recite, continue, a verse "
               "about a theme, a fortune).")
    L.append("Good:")
    L += [f"- {g}" for g in good]
    L.append("")
    L.append("Not good:")
    L += [f"- {b}" for b in bad]
    L.append("")
    with open(args.out, "w") as f:
        f.write("\n".join(L))


if __name__ == "__main__":
    main()
