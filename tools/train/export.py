"""Export of the trained default model and its DSpark drafter in the real checkpoint layout, through the reference's
checkpoint writer (tools/reference/msaref/checkpoint.py), and reading them back.

Model directory (what `msa` loads):
  config.json                      MiniMax-M3 VL wrapper form (`text_config`, `quantization_config` ModelOpt NVFP4
                                   experts with M3.1's W4A4 activations, NVFP4 KV cache)
  model-0000i-of-0000n.safetensors real tensor names (`language_model.model.layers.N....`); routed experts NVFP4 in
  model.safetensors.index.json     ModelOpt layout (w1/w3 share weight_scale_2), router FP32, everything else BF16
  generation_config.json, tokenizer.json, tokenizer_config.json, special_tokens_map.json
  drafter/config.json              the DSpark drafter (format in tools/train/README.md)
  drafter/model.safetensors        BF16
"""
from __future__ import annotations

import json
import os
import shutil
import sys
import tarfile

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "reference"))
from msaref import formats as fm  # noqa: E402
from msaref.checkpoint import load_model, param_specs, write_checkpoint  # noqa: E402
from msaref.config import parse_config  # noqa: E402
from msaref.presets import _text_config, _wrap  # noqa: E402
from msaref.safetensors_io import SafetensorsFile, write_file  # noqa: E402

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")
GENERATION_CONFIG = {"do_sample": True, "temperature": 0.8, "top_p": 0.95, "top_k": 40, "max_new_tokens": 256}


def model_config_json(c, bos_id: int, eos_id: int, note: str = "") -> dict:
    """config.json of the default model from a TinyConfig (model.py)."""
    text = _text_config(c.hidden_size, c.num_layers, c.num_heads, c.num_kv_heads, c.vocab_size,
                        [int(m) for m in c.moe_layers], [int(m) for m in c.msa_layers],
                        inter=c.intermediate_size, shared=c.shared_intermediate_size,
                        dense=c.dense_intermediate_size, experts=c.num_experts, top_k=c.top_k_experts,
                        topk_blocks=c.topk_blocks, rsf=c.routed_scaling_factor, head_dim=c.head_dim,
                        rotary_dim=c.rotary_dim)
    text.update({"max_position_embeddings": c.max_position_embeddings, "rope_theta": c.rope_theta,
                 "rms_norm_eps": c.rms_norm_eps, "bos_token_id": bos_id, "eos_token_id": eos_id})
    quant = {"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16, "kv_cache_quant_algo": "NVFP4",
             "moe_activation_quant": "nvfp4_row_scaled",
             "ignored_layers": ["lm_head", "model.embed_tokens", "self_attn", "shared_experts", "mlp",
                                "block_sparse_moe.gate"]}
    cfg = _wrap(text, quant)
    cfg["_note"] = note or ("MSA Engine's default model: a tiny MiniMax-M3.1-architecture model trained by tools/train "
                            "(tools/train/README.md, docs/quality.md).")
    parse_config(cfg)  # the reference's checks of model.md section 7
    return cfg


def export_model(state: dict, c, out_dir: str, bos_id: int, eos_id: int, tokenizer_dir: str | None,
                 note: str = ""):
    """Write the checkpoint of a TinyM3 state_dict (text-only names) to out_dir (with the tokenizer files of
    tokenizer_dir, if given)."""
    cfg_json = model_config_json(c, bos_id, eos_id, note)
    cfg = parse_config(cfg_json)
    os.makedirs(out_dir, exist_ok=True)
    for f in os.listdir(out_dir):
        if f.endswith(".safetensors") or f == "model.safetensors.index.json":
            os.remove(os.path.join(out_dir, f))
    names = {sp.key for sp in param_specs(cfg)}
    missing = names - set(state)
    if missing:
        raise ValueError(f"export: the state lacks {sorted(missing)[:5]}")

    def value_of(sp):
        return state[sp.key].detach().float().cpu()

    write_checkpoint(out_dir, cfg_json, cfg, value_of, lambda sp: "nvfp4" if ".experts." in sp.key else "bf16",
                     shard_bytes=8 << 20,
                     generation_config={"bos_token_id": bos_id, "eos_token_id": eos_id, **GENERATION_CONFIG})
    if tokenizer_dir:
        for fn in TOKENIZER_FILES:
            shutil.copy(os.path.join(tokenizer_dir, fn), os.path.join(out_dir, fn))


def read_model_state(model_dir: str) -> dict:
    """The exported weights, dequantised exactly (reference loader), as a TinyM3 state_dict."""
    m, _ = load_model(model_dir, device="cpu", dtype=torch.float32)
    return {k: v.detach().clone() for k, v in m.state_dict().items()}


def drafter_config_json(dc) -> dict:
    return {"architectures": ["DSparkMiniMaxDraftModel"], "model_type": "dspark",
            "hidden_size": dc.hidden_size, "num_hidden_layers": dc.num_layers, "num_attention_heads": dc.num_heads,
            "num_key_value_heads": dc.num_kv_heads, "head_dim": dc.head_dim, "rotary_dim": dc.rotary_dim,
            "rope_theta": dc.rope_theta, "rms_norm_eps": dc.rms_norm_eps, "use_gemma_norm": True,
            "use_qk_norm": True, "qk_norm_type": "per_head", "hidden_act": "swigluoai",
            "intermediate_size": dc.intermediate_size, "swiglu_alpha": dc.swiglu_alpha,
            "swiglu_limit": dc.swiglu_limit, "vocab_size": dc.vocab_size,
            "target_layer_ids": list(dc.target_layer_ids), "dspark_block_size": dc.block_size,
            "mask_token_id": dc.mask_token_id, "sliding_window": dc.sliding_window, "causal": False,
            "markov_head": {"type": "vanilla", "rank": dc.markov_rank},
            "shares_target_embeddings": True, "shares_target_lm_head": True, "target_model": ".."}


def export_drafter(state: dict, dc, out_dir: str):
    os.makedirs(out_dir, exist_ok=True)
    write_file(os.path.join(out_dir, "model.safetensors"),
               {k: ("BF16", fm.float_to_bf16_bits(v.detach().float().cpu())) for k, v in sorted(state.items())})
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(drafter_config_json(dc), f, indent=1)
        f.write("\n")


def tiny_from_dir(model_dir: str):
    """The training model (model.py) with a checkpoint's weights (dequantised exactly)."""
    from model import TinyConfig, TinyM3  # here: model.py is only needed by the callers that load one
    from msaref.config import load_config

    c = load_config(model_dir)
    cfg = TinyConfig(vocab_size=c.vocab_size, hidden_size=c.hidden_size, num_layers=c.num_layers,
                     num_heads=c.num_heads, num_kv_heads=c.num_kv_heads, head_dim=c.head_dim,
                     rotary_dim=c.rotary_dim, rope_theta=c.rope_theta, rms_norm_eps=c.rms_norm_eps,
                     dense_intermediate_size=c.dense_intermediate_size, intermediate_size=c.intermediate_size,
                     shared_intermediate_size=c.shared_intermediate_size, num_experts=c.num_experts,
                     top_k_experts=c.top_k_experts, routed_scaling_factor=c.routed_scaling_factor,
                     dense_layers=c.msa_layers.index(True), topk_blocks=c.topk_blocks, block_size=c.block_size)
    m = TinyM3(cfg)
    m.load_state_dict(read_model_state(model_dir))
    return m.eval()


def read_drafter_state(drafter_dir: str) -> dict:
    f = SafetensorsFile(os.path.join(drafter_dir, "model.safetensors"))
    out = {}
    for name in f.names():
        arr = f.get(name)
        out[name] = (fm.bf16_bits_to_float(arr) if f.info(name).dtype == "BF16"
                     else torch.from_numpy(np.ascontiguousarray(arr)).float())
    return out


def dir_size(path: str) -> int:
    return sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(path) for f in fs)


def pack(src_dir: str, tar_path: str):
    """One tar file of a directory (the GPU machine sends back at most 8 files)."""
    tmp = tar_path + ".tmp"
    with tarfile.open(tmp, "w") as t:
        for name in sorted(os.listdir(src_dir)):
            t.add(os.path.join(src_dir, name), arcname=name)
    os.replace(tmp, tar_path)


def unpack(tar_path: str, out_dir: str):
    """Replace the checkpoint files of out_dir by those of a tar made by pack() (other files stay)."""
    os.makedirs(out_dir, exist_ok=True)
    with tarfile.open(tar_path) as t:
        members = t.getmembers()
        for m in members:
            if m.name.startswith(("/", "..")) or "/.." in m.name or not (m.isfile() or m.isdir()):
                raise ValueError(f"{tar_path}: unexpected member {m.name!r}")
        for f in os.listdir(out_dir):
            if f.endswith(".safetensors") or f == "model.safetensors.index.json":
                os.remove(os.path.join(out_dir, f))
        t.extractall(out_dir, members=members)


def main():
    import argparse
    ap = argparse.ArgumentParser(description="Install a GPU run's checkpoints (train.py --out RUN: model.tar, "
                                             "drafter.tar, noqat.tar, logs) into the model directories")
    ap.add_argument("run", help="train.py's output directory")
    ap.add_argument("--model-dir", default=os.path.join(HERE, "..", "..", "models", "default"))
    # models/ holds only the shipped model (< 30 MB); the ablation lives with the training tools
    ap.add_argument("--noqat-dir", default=os.path.join(HERE, "ablations", "noqat"))
    ap.add_argument("--tokenizer-dir", default=None, help="default: --model-dir (its committed tokenizer files)")
    args = ap.parse_args()
    tok_dir = os.path.abspath(args.tokenizer_dir or args.model_dir)
    tok = {fn: open(os.path.join(tok_dir, fn), "rb").read() for fn in TOKENIZER_FILES}
    unpack(os.path.join(args.run, "model.tar"), args.model_dir)
    print(f"model -> {args.model_dir}")
    if os.path.exists(os.path.join(args.run, "drafter.tar")):
        shutil.rmtree(os.path.join(args.model_dir, "drafter"), ignore_errors=True)
        unpack(os.path.join(args.run, "drafter.tar"), os.path.join(args.model_dir, "drafter"))
        print(f"drafter -> {args.model_dir}/drafter")
    dirs = [args.model_dir]
    if os.path.exists(os.path.join(args.run, "noqat.tar")):
        unpack(os.path.join(args.run, "noqat.tar"), args.noqat_dir)
        dirs.append(args.noqat_dir)
        print(f"no-QAT ablation -> {args.noqat_dir}")
    for d in dirs:
        for fn, data in tok.items():
            with open(os.path.join(d, fn), "wb") as f:
                f.write(data)
        load_model(d)  # the reference reads it back (checks names, shapes, formats)
    # the run's logs travel with the model (the loss curve of docs/quality.md)
    logs = os.path.join(args.model_dir, "training")
    os.makedirs(logs, exist_ok=True)
    for fn in ("train_log.csv", "drafter_log.csv", "noqat_log.csv", "summary.json", "train.log"):
        if os.path.exists(os.path.join(args.run, fn)):
            shutil.copyfile(os.path.join(args.run, fn), os.path.join(logs, fn))
    for d in dirs:
        print(f"{d}: {dir_size(d) / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
