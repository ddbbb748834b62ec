#!/usr/bin/env python3
"""Trains MSA Engine's default model (a tiny MiniMax-M3.1-architecture model) and its DSpark drafter on the GPU.
Export and evaluation run afterwards, elsewhere (export.py, quality.py); this script only trains and saves.

  python3 tools/train/train.py --stage STAGE_DIR --out OUT_DIR [--smoke] [--steps N ...]

STAGE_DIR (made by stage.py): train.bin, heldout.bin (uint16 token ids), data.json, tokenizer.json.
OUT_DIR receives at most 8 files (what the GPU machine sends back), each as soon as it is ready (a later failure
loses nothing before it); checkpoints are in the real layout (export.py), one tar file each:
  model.tar          the trained model (config.json, safetensors shards, generation_config.json)
  train_log.csv      loss curve: step, phase, lr, LM loss, indexer KL, expert load, held-out loss
  drafter.tar, drafter_log.csv         the DSpark drafter
  noqat.tar, noqat_log.csv             the no-QAT ablation (same steps and batches, QAT phase without fake quant)
  summary.json       what ran, how long, the step counts (pass --steps/--phase-steps back to reproduce exactly)
(gpu_run.sh adds train.log.) `export.py OUT_DIR` installs them into models/.

Target training, three phases (fixed seeds; the batch of step i is a pure function of (seed, i)):
  1. dense warm-up: every layer attends densely; the MSA indexers already learn with the KL objective against the
     dense attention distribution (their input is stop-gradient, so they do not change the model);
  2. sparse: MSA layers attend only to their top-k 128-token blocks chosen by the indexer; the indexer's KL
     objective is taken over the selected tokens (background msa.md 1.8); loss = LM + kl_weight * mean KL;
  3. QAT: as 2, plus NVFP4 fake quantisation of K, V and index-K (formats.md section 3) and NVFP4 W4A4 experts
     (model.md section 4), straight-through gradients.
By default the phases and the learning-rate schedule follow progress = max(elapsed / --target-budget,
step / --max-steps) (fractions --dense-frac, --sparse-frac); the step counts reached are logged and saved. MoE balance: aux-loss-free update of
e_score_correction_bias after every step.
"""
from __future__ import annotations

import argparse
import copy
import csv
import shutil
import tempfile
import json
import math
import os
import sys
import time
import traceback

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bpe import ByteLevelBPE  # noqa: E402
from drafter import DrafterConfig, DSparkDrafter, drafter_loss  # noqa: E402
from export import export_drafter, export_model, pack  # noqa: E402
from model import Mode, TinyConfig, TinyM3, shipped_form_  # noqa: E402
from train_tokenizer import BOS, EOS, MASK  # noqa: E402

PHASES = ("dense", "sparse", "qat")
T_START = time.time()


def log(*a):
    print(f"[{time.time() - T_START:6.1f}s]", *a, flush=True)


def smoke_config(vocab: int) -> TinyConfig:
    """The CPU smoke test's model: the same structure, much smaller (top-2 blocks: sparse beyond 256 tokens)."""
    return TinyConfig(vocab_size=vocab, hidden_size=64, num_layers=3, num_heads=2, num_kv_heads=1,
                      dense_intermediate_size=64, intermediate_size=32, shared_intermediate_size=32, num_experts=4,
                      topk_blocks=2)


def smoke_drafter(dc: DrafterConfig) -> DrafterConfig:
    dc.intermediate_size, dc.sliding_window, dc.markov_rank = 64, 256, 8
    return dc


def drafter_config(cfg: TinyConfig, tok) -> DrafterConfig:
    return DrafterConfig(vocab_size=cfg.vocab_size, mask_token_id=tok.added_ids[MASK],
                         target_layer_ids=sorted({1, cfg.num_layers // 2 + 1, cfg.num_layers - 1}),
                         hidden_size=cfg.hidden_size, num_heads=cfg.num_heads, num_kv_heads=cfg.num_kv_heads,
                         head_dim=cfg.head_dim, rotary_dim=cfg.rotary_dim, rope_theta=cfg.rope_theta)


class Batches:
    """Random windows of T+1 tokens; batch i is a pure function of (seed, i)."""

    def __init__(self, data: np.ndarray, B: int, T: int, seed: int):
        self.data, self.B, self.T, self.seed = data, B, T, seed

    def get(self, i: int, device) -> torch.Tensor:
        rng = np.random.default_rng([self.seed, i])
        starts = rng.integers(0, len(self.data) - self.T - 1, size=self.B)
        x = np.stack([self.data[s:s + self.T + 1] for s in starts]).astype(np.int64)
        return torch.from_numpy(x).to(device)


def windows(data: np.ndarray, T: int, limit: int | None = None) -> torch.Tensor:
    n = len(data) // T
    if limit:
        n = min(n, limit)
    return torch.from_numpy(data[:n * T].astype(np.int64).reshape(n, T))


def autocast(device):
    if device.type == "cuda":
        return torch.autocast(device_type="cuda", dtype=torch.bfloat16)
    return torch.autocast(device_type="cpu", enabled=False)


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


@torch.no_grad()
def eval_nll(model, wins: torch.Tensor, mode: Mode, device, batch: int = 4) -> float:
    """Mean NLL (nats) of tokens 1..T-1 of each window given the window's earlier tokens."""
    total, count = 0.0, 0
    for i in range(0, wins.shape[0], batch):
        x = wins[i:i + batch].to(device)
        with autocast(device):
            lg = model.logits(model(x[:, :-1], mode))
        total += float(F.cross_entropy(lg.float().reshape(-1, lg.shape[-1]), x[:, 1:].reshape(-1), reduction="sum"))
        count += x[:, 1:].numel()
    return total / count


def lr_at(step: int, frac: float, base: float, warmup: int) -> float:
    """Linear warm-up over `warmup` steps, then cosine to 10% over the run (frac = progress in [0, 1])."""
    if step < warmup:
        return base * (step + 1) / warmup
    return base * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, frac))))


def mode_for(phase: int, kl_rows: int) -> Mode:
    return Mode(sparse=phase >= 1, kv="nvfp4" if phase == 2 else None, w4a4=phase == 2, kl_rows=kl_rows)


def make_optimizer(model, lr):
    params = [p for p in model.parameters() if p.requires_grad]
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                             lr=lr, betas=(0.9, 0.95), eps=1e-8), params


class CsvLog:
    def __init__(self, path, header):
        self.f = open(path, "w", newline="")
        self.w = csv.writer(self.f)
        self.w.writerow(header)

    def row(self, r, prefix=""):
        self.w.writerow(r)
        self.f.flush()
        log(prefix + " ".join(str(x) for x in r))

    def close(self):
        self.f.close()


def train_step(model, opt, params, x, mode, lr, args):
    for g in opt.param_groups:
        g["lr"] = lr
    stats = {}
    with autocast(x.device):
        lg = model.logits(model(x[:, :-1], mode, stats=stats))
    loss_lm = F.cross_entropy(lg.float().reshape(-1, lg.shape[-1]), x[:, 1:].reshape(-1))
    kl = torch.stack(stats["kl"]).mean() if stats["kl"] else torch.zeros((), device=x.device)
    opt.zero_grad(set_to_none=True)
    (loss_lm + args.kl_weight * kl).backward()
    torch.nn.utils.clip_grad_norm_(params, 1.0)
    opt.step()
    loads = []
    with torch.no_grad():
        for moe in model.moe_layers():
            load = moe.last_load.float()
            moe.e_score_correction_bias += args.bias_rate * torch.sign(load.mean() - load)
            loads.append(float(load.max() / load.mean().clamp(min=1e-9)))
    return float(loss_lm), float(kl), max(loads) if loads else 0.0


# --------------------------------------------------------------------------------------------------------------
def train_target(model, train, held, args, device, out):
    """Returns (summary, snapshot at the start of the QAT phase: model and optimizer state, for the ablation)."""
    opt, params = make_optimizer(model, args.lr)
    batches = Batches(train, args.batch, args.seq, args.seed)
    eval_wins = windows(held, args.seq + 1, args.eval_windows)
    lg = CsvLog(os.path.join(out, "train_log.csv"), ["step", "phase", "lr", "loss", "indexer_kl", "max_expert_load",
                                                     "tokens_per_s", "elapsed_s", "heldout_loss"])
    fixed = args.steps > 0
    if fixed:
        bounds = [int(v) for v in args.phase_steps.split(",")] if args.phase_steps else \
            [int(args.dense_frac * args.steps), int((args.dense_frac + args.sparse_frac) * args.steps)]
    phase_start = {0: 0}
    phase_time = {0: 0.0}
    lrs = []
    snapshot = None
    tokens, step, t0 = 0, 0, time.time()
    heldout = {}
    while True:
        el = time.time() - t0
        # progress: by steps, or by time capped by --max-steps (a fast GPU must not run 30 epochs of this corpus)
        frac = step / args.steps if fixed else max(el / args.target_budget, step / args.max_steps)
        if frac >= 1.0:
            break
        if fixed:
            ph = 0 if step < bounds[0] else (1 if step < bounds[1] else 2)
        else:
            ph = 0 if frac < args.dense_frac else (1 if frac < args.dense_frac + args.sparse_frac else 2)
        if ph not in phase_start:
            phase_start[ph] = step
            phase_time[ph] = el
            log(f"step {step}: phase {PHASES[ph]} begins")
            if ph == 2:
                snapshot = {"model": copy.deepcopy(model.state_dict()), "opt": copy.deepcopy(opt.state_dict()),
                            "step": step}
        lr = lr_at(step, frac, args.lr, args.warmup)
        lrs.append(lr)
        x = batches.get(step, device)
        loss, kl, load = train_step(model, opt, params, x, mode_for(ph, args.kl_rows), lr, args)
        if not math.isfinite(loss):
            raise RuntimeError(f"target training diverged at step {step} (loss {loss})")
        tokens += x[:, 1:].numel()
        step += 1
        if step % args.log_every == 0 or step == 1:
            hl = ""
            if step % args.eval_every == 0:
                model.eval()
                hl = eval_nll(model, eval_wins, mode_for(ph, 0), device)
                model.train()
                heldout[step] = hl
            el = time.time() - t0
            lg.row([step, PHASES[ph], f"{lr:.3e}", f"{loss:.4f}", f"{kl:.4f}", f"{load:.2f}", f"{tokens / el:.0f}",
                    f"{el:.1f}", f"{hl:.4f}" if hl != "" else ""])
    model.eval()
    final_held = eval_nll(model, eval_wins, mode_for(2 if 2 in phase_start else max(phase_start), 0), device)
    lg.row([step, "final", "", f"{loss:.4f}", f"{kl:.4f}", "", "", f"{time.time() - t0:.1f}", f"{final_held:.4f}"])
    lg.close()
    starts = [phase_start.get(1, step), phase_start.get(2, step)]
    # steps per second of the sparse phase: the no-QAT ablation runs its steps in that mode
    sparse_rate = ((starts[1] - starts[0]) / max(1e-3, phase_time[2] - phase_time[1])) if 2 in phase_time and \
        starts[1] > starts[0] else None
    summary = {"steps": step, "phase_steps": starts, "seconds": time.time() - t0, "tokens": tokens,
               "final_train_loss": loss, "heldout_loss": heldout, "final_heldout_loss": final_held,
               "reproduce": f"--steps {step} --phase-steps {starts[0]},{starts[1]}", "lrs": lrs,
               "phase_seconds": [phase_time.get(1, el) - phase_time[0], phase_time.get(2, el) - phase_time.get(1, el),
                                 el - phase_time.get(2, el)], "sparse_steps_per_s": sparse_rate}
    return summary, snapshot


def train_noqat(model, snapshot, lrs, train, held, args, device, out):
    """The ablation: from the QAT phase's starting point, the same steps (same batches and learning rates) in the
    sparse phase's mode, without any fake quantisation."""
    model.load_state_dict(snapshot["model"])
    model.train()
    opt, params = make_optimizer(model, args.lr)
    opt.load_state_dict(snapshot["opt"])
    batches = Batches(train, args.batch, args.seq, args.seed)
    lg = CsvLog(os.path.join(out, "noqat_log.csv"), ["step", "lr", "loss", "indexer_kl", "max_expert_load",
                                                     "elapsed_s"])
    t0 = time.time()
    for step in range(snapshot["step"], len(lrs)):
        if time.time() - T_START > args.deadline - 10:
            raise RuntimeError(f"deadline: the ablation reached only step {step} of {len(lrs)}")
        x = batches.get(step, device)
        loss, kl, load = train_step(model, opt, params, x, mode_for(1, args.kl_rows), lrs[step], args)
        if (step + 1) % args.log_every == 0:
            lg.row([step + 1, f"{lrs[step]:.3e}", f"{loss:.4f}", f"{kl:.4f}", f"{load:.2f}",
                    f"{time.time() - t0:.1f}"], "noqat ")
    model.eval()
    final_held = eval_nll(model, windows(held, args.seq + 1, args.eval_windows), mode_for(1, 0), device)
    lg.close()
    return {"steps": len(lrs) - snapshot["step"], "seconds": time.time() - t0, "final_heldout_loss": final_held}


def train_drafter(target, drafter, train, args, device, out, budget):
    dc = drafter.c
    params = [p for p in drafter.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=args.drafter_lr, betas=(0.9, 0.95), weight_decay=0.01)
    batches = Batches(train, args.drafter_batch, args.seq, args.seed + 1)
    tmode = Mode(sparse=True, kv="nvfp4", w4a4=True, w4a4_weights=False)  # experts already NVFP4 values
    lg = CsvLog(os.path.join(out, "drafter_log.csv"), ["step", "lr", "loss", "kl", "ce", "top1_pos0", "top1_all",
                                                       "elapsed_s"])
    fixed = args.drafter_steps > 0
    t0, step = time.time(), 0
    while True:
        frac = step / args.drafter_steps if fixed else (time.time() - t0) / budget
        if frac >= 1.0:
            break
        lr = lr_at(step, frac, args.drafter_lr, 20)
        for g in opt.param_groups:
            g["lr"] = lr
        x = batches.get(step, device)[:, :args.seq]
        rng = np.random.default_rng([args.seed + 2, step])
        n_anchor = min(args.anchors, args.seq - dc.block_size - 17)
        anchors = torch.from_numpy(np.sort(rng.choice(np.arange(16, args.seq - dc.block_size - 1), n_anchor,
                                                      replace=False))).to(device)
        with torch.no_grad(), autocast(device):
            stats = {}
            h = target(x, tmode, taps=tuple(dc.target_layer_ids), stats=stats)
            tlog = target.logits(h).float()
            taps = torch.cat([stats["taps"][i] for i in dc.target_layer_ids], -1)
        with autocast(device):
            loss, kl, ce, hit = drafter_loss(drafter, target, x, taps, tlog, anchors)
        if not math.isfinite(float(loss)):
            raise RuntimeError(f"drafter training diverged at step {step}")
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        step += 1
        if step % args.log_every == 0 or step == 1:
            lg.row([step, f"{lr:.3e}", f"{float(loss):.4f}", f"{float(kl):.4f}", f"{float(ce):.4f}",
                    f"{float(hit[..., 0].mean()):.3f}", f"{float(hit.mean()):.3f}", f"{time.time() - t0:.1f}"],
                   "drafter ")
    lg.close()
    return {"steps": step, "seconds": time.time() - t0}


def ship(out: str, name: str, write):
    """write(dir) writes a checkpoint directory (real layout, export.py); it is sent back as OUT/name.tar."""
    d = tempfile.mkdtemp(prefix=f"msa_{name}_")
    try:
        write(d)
        pack(d, os.path.join(out, name + ".tar"))
    finally:
        shutil.rmtree(d, ignore_errors=True)
    log(f"saved {out}/{name}.tar ({os.path.getsize(os.path.join(out, name + '.tar')) / 1e6:.1f} MB)")


def cpu_state(m):
    return {k: v.detach().float().cpu().clone() for k, v in m.state_dict().items()}


# --------------------------------------------------------------------------------------------------------------
def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stage", required=True, help="directory from stage.py")
    ap.add_argument("--out", required=True, help="checkpoints (tar files), logs and summary")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--smoke", action="store_true", help="tiny model and sizes for a CPU test of the pipeline")
    ap.add_argument("--deadline", type=float, default=380.0, help="seconds after start by which everything ends")
    ap.add_argument("--target-budget", type=float, default=210.0, help="seconds of target training")
    ap.add_argument("--steps", type=int, default=0, help="fixed step count instead of --target-budget")
    ap.add_argument("--max-steps", type=int, default=900, help="cap of the time-based run (900 x 16 x 2048 "
                    "tokens = about 7.5 epochs; 1581 steps overfitted: held-out loss 3.43 at step 750, 4.03 at 1581)")
    ap.add_argument("--phase-steps", default="", help="with --steps: first sparse step,first QAT step")
    ap.add_argument("--dense-frac", type=float, default=0.3)
    ap.add_argument("--sparse-frac", type=float, default=0.5)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--kl-rows", type=int, default=256)
    ap.add_argument("--kl-weight", type=float, default=1.0)
    ap.add_argument("--bias-rate", type=float, default=2e-3)
    ap.add_argument("--drafter-budget", type=float, default=150.0, help="seconds of drafter training at most "
                    "(less when the --deadline needs it)")
    ap.add_argument("--drafter-steps", type=int, default=0)
    ap.add_argument("--drafter-batch", type=int, default=8)
    ap.add_argument("--drafter-lr", type=float, default=2e-3)
    ap.add_argument("--anchors", type=int, default=64)
    ap.add_argument("--no-ablation", action="store_true")
    ap.add_argument("--log-every", type=int, default=10)
    ap.add_argument("--eval-every", type=int, default=50)
    ap.add_argument("--eval-windows", type=int, default=8)
    args = ap.parse_args()

    os.makedirs(args.out, exist_ok=True)
    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    device = torch.device(args.device)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    with open(os.path.join(args.stage, "data.json")) as f:
        data_info = json.load(f)
    train = np.fromfile(os.path.join(args.stage, "train.bin"), dtype=np.uint16)
    held = np.fromfile(os.path.join(args.stage, "heldout.bin"), dtype=np.uint16)
    tok = ByteLevelBPE.from_hf_json(os.path.join(args.stage, "tokenizer.json"))
    if tok.vocab_size != data_info["vocab_size"]:
        sys.exit("train: the staged token ids were made with another tokenizer: rerun tools/train/stage.py")

    cfg = smoke_config(tok.vocab_size) if args.smoke else TinyConfig(vocab_size=tok.vocab_size)
    model = TinyM3(cfg)
    model.init_weights(args.seed)
    model.to(device).train()
    n_params = sum(p.numel() for p in model.parameters())
    log(f"model: {n_params / 1e6:.2f} M parameters, device {device}, torch {torch.__version__}, "
        f"train {len(train)} tokens, held-out {len(held)}")
    summary = {"torch": torch.__version__, "device": str(device), "args": vars(args), "data": data_info,
               "config": cfg.__dict__, "parameters": n_params, "bos_id": tok.added_ids[BOS],
               "eos_id": tok.added_ids[EOS], "smoke": args.smoke}
    if device.type == "cuda":
        summary["gpu"] = torch.cuda.get_device_name(0)

    def write_summary():
        with open(os.path.join(args.out, "summary.json"), "w") as f:
            json.dump(summary, f, indent=1)

    # 1. the model (nothing below may lose it)
    summary["target"], snapshot = train_target(model, train, held, args, device, args.out)
    lrs = summary["target"].pop("lrs")
    bos, eos = tok.added_ids[BOS], tok.added_ids[EOS]
    state = cpu_state(model)
    ship(args.out, "model", lambda d: export_model(state, cfg, d, bos, eos, None))
    write_summary()

    # 2. the drafter, on the shipped form of the target (experts quantised to NVFP4)
    # the drafter comes before the ablation: it gets the time the ablation does not need, or all of it
    remaining = args.deadline - (time.time() - T_START)
    qat_steps = summary["target"]["steps"] - summary["target"]["phase_steps"][1]
    rate = summary["target"]["sparse_steps_per_s"]
    # the ablation replays the QAT phase's steps at the sparse phase's speed (no fake quantisation), then evaluates
    # and saves (about 10 s)
    ablation_need = 0.0 if (args.no_ablation or snapshot is None) else \
        (qat_steps / rate * 1.15 if rate else summary["target"]["phase_seconds"][2]) + 15.0
    budget = min(args.drafter_budget, remaining - ablation_need - 15.0)
    if budget < 10:
        budget = min(args.drafter_budget, remaining - 15.0)
    if args.drafter_steps or budget > 10:
        try:
            target = TinyM3(cfg)
            target.load_state_dict(model.state_dict())
            shipped_form_(target)
            target.to(device).eval()
            for p in target.parameters():
                p.requires_grad_(False)
            dc = drafter_config(cfg, tok)
            if args.smoke:
                dc = smoke_drafter(dc)
            drafter = DSparkDrafter(dc)
            drafter.init_weights(args.seed + 7)
            drafter.to(device).train()
            summary["drafter"] = train_drafter(target, drafter, train, args, device, args.out, budget)
            summary["drafter"]["parameters"] = sum(p.numel() for p in drafter.parameters())
            dstate = cpu_state(drafter)
            ship(args.out, "drafter", lambda d: export_drafter(dstate, dc, d))
            del target
        except Exception as e:  # keep the model and go on
            summary["drafter"] = {"error": repr(e)}
            log("drafter FAILED:\n" + traceback.format_exc())
    else:
        summary["drafter"] = {"skipped": f"only {remaining:.0f} s left"}
    write_summary()

    # 3. the no-QAT ablation (optional)
    remaining = args.deadline - (time.time() - T_START)
    if args.no_ablation or snapshot is None:
        summary["noqat"] = {"skipped": "no QAT phase" if snapshot is None else "--no-ablation"}
    elif remaining < ablation_need:
        summary["noqat"] = {"skipped": f"only {remaining:.0f} s left, the ablation needs about {ablation_need:.0f} s"}
    else:
        try:
            summary["noqat"] = train_noqat(model, snapshot, lrs, train, held, args, device, args.out)
            nstate = cpu_state(model)
            ship(args.out, "noqat", lambda d: export_model(
                nstate, cfg, d, bos, eos, None,
                note="The no-QAT ablation of MSA Engine's default model (same steps and batches, the last phase "
                     "without fake quantisation); used by docs/quality.md only."))
        except Exception as e:
            summary["noqat"] = {"error": repr(e)}
            log("no-QAT ablation FAILED:\n" + traceback.format_exc())
    summary["total_seconds"] = time.time() - T_START
    write_summary()
    log(f"done in {summary['total_seconds']:.0f} s; target {summary['target']['reproduce']}; "
        f"held-out loss {summary['target']['final_heldout_loss']:.4f}")


if __name__ == "__main__":
    main()
