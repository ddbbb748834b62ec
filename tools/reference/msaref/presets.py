"""Named configs of model.md section 6 schema and their random weights.

Weights come from a counter-based generator (splitmix64 of a per-tensor offset + index, uniform values scaled to a
chosen standard deviation). Only integer operations and exact or single IEEE float64 operations are used, so the
same preset gives bit-identical checkpoints on every machine and numpy/torch version (the goldens record SHA-256s).
"""
from __future__ import annotations

import copy
import hashlib
import math

import numpy as np
import torch

from .checkpoint import ParamSpec

# ----------------------------------------------------------------------------------------------------------------
# Deterministic random numbers
# ----------------------------------------------------------------------------------------------------------------
_MASK = np.uint64(0xFFFFFFFFFFFFFFFF)


def _splitmix64(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        z = x + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def uniform(name: str, seed: int, shape: tuple, std: float) -> torch.Tensor:
    """Uniform values with standard deviation `std` (range +-std*sqrt(3)), float32 tensor, deterministic."""
    n = int(np.prod(shape, dtype=np.int64)) if len(shape) else 1
    off = int.from_bytes(hashlib.sha256(f"{seed}:{name}".encode()).digest()[:8], "little")
    with np.errstate(over="ignore"):
        ctr = np.arange(n, dtype=np.uint64) + np.uint64(off)
    z = _splitmix64(ctr)
    u = (z >> np.uint64(11)).astype(np.float64) * (2.0 ** -52) - 1.0  # exact, in [-1, 1)
    v = u * (std * math.sqrt(3.0))
    return torch.from_numpy(v.astype(np.float32).reshape(shape))


# ----------------------------------------------------------------------------------------------------------------
# Presets
# ----------------------------------------------------------------------------------------------------------------
def _text_config(hidden, layers, heads, kv_heads, vocab, moe, msa, *, inter=256, shared=256, dense=512,
                 experts=8, top_k=2, n_shared=1, topk_blocks=4, rsf=2.0, head_dim=128, rotary_dim=64,
                 use_bias=True):
    return {
        "architectures": ["MiniMaxM3SparseForCausalLM"],
        "dtype": "bfloat16",
        "hidden_size": hidden,
        "intermediate_size": inter,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "head_dim": head_dim,
        "vocab_size": vocab,
        "max_position_embeddings": 1048576,
        "rms_norm_eps": 1e-06,
        "use_gemma_norm": True,
        "attention_output_gate": False,
        "rope_theta": 5000000,
        "rotary_dim": rotary_dim,
        "partial_rotary_factor": rotary_dim / head_dim,
        "hidden_act": "swigluoai",
        "use_qk_norm": True,
        "qk_norm_type": "per_head",
        "tie_word_embeddings": False,
        "dense_intermediate_size": dense,
        "shared_intermediate_size": shared,
        "num_local_experts": experts,
        "num_experts_per_tok": top_k,
        "n_shared_experts": n_shared,
        "scoring_func": "sigmoid",
        "use_routing_bias": use_bias,
        "moe_layer_freq": list(moe),
        "num_mtp_modules": 0,
        "swiglu_alpha": 1.702,
        "swiglu_limit": 7.0,
        "routed_scaling_factor": rsf,
        "sparse_attention_config": {
            "use_sparse_attention": True,
            "sparse_index_dim": head_dim,
            "sparse_num_index_heads": kv_heads,
            "sparse_topk_blocks": topk_blocks,
            "sparse_block_size": 128,
            "sparse_disable_index_value": list(msa),
            "sparse_score_type": "max",
            "sparse_init_block": 0,
            "sparse_local_block": 1,
            "sparse_attention_freq": list(msa),
        },
    }


def _wrap(text: dict, quant: dict | None) -> dict:
    cfg = {"architectures": ["MiniMaxM3SparseForConditionalGeneration"], "model_type": "minimax_m3_vl",
           "text_config": text, "image_token_index": 200025 % text["vocab_size"],
           "video_token_index": 200026 % text["vocab_size"]}
    if quant is not None:
        cfg["quantization_config"] = quant
    return cfg


def _flat(text: dict, quant: dict | None) -> dict:
    cfg = dict(text)
    cfg["model_type"] = "minimax_m3"
    if quant is not None:
        cfg["quantization_config"] = quant
    return cfg


MXFP8_QUANT = {"quant_method": "mxfp8", "activation_scheme": "dynamic", "weight_block_size": [1, 32],
               "ignored_layers": ["lm_head", "model.embed_tokens", "vision_tower", "multi_modal_projector",
                                  "patch_merge_mlp"]}


def _is_expert(sp: ParamSpec) -> bool:
    return ".experts." in sp.key


PRESETS = {}


def preset(name):
    def deco(f):
        PRESETS[name] = f
        return f
    return deco


@preset("tiny-mix")
def _tiny_mix():
    """4 layers covering every (attention, FFN) pair: dense+MLP, MSA+MoE, MSA+MLP, dense+MoE. BF16 weights,
    GQA 4 (8 query heads, 2 KV heads), top-4 blocks (sparse beyond 512 tokens), NVFP4 KV by default."""
    text = _text_config(256, 4, 8, 2, 1024, moe=[0, 1, 0, 1], msa=[0, 1, 1, 0])
    return dict(config=_wrap(text, {"kv_cache_quant_algo": "NVFP4"}), fmt_of=lambda sp: "bf16")


@preset("m31-nvfp4")
def _m31():
    """M3.1 style: all 3 layers MSA, layer 0 dense MLP, layers 1-2 MoE with NVFP4 W4A4 experts (w1/w3 share
    weight_scale_2, input_scale present and ignored), every other projection MXFP8, NVFP4 KV. GQA 4 (16/4)."""
    text = _text_config(256, 3, 16, 4, 1024, moe=[0, 1, 1], msa=[1, 1, 1], inter=128, experts=16, top_k=4)
    quant = dict(MXFP8_QUANT, kv_cache_quant_algo="NVFP4", moe_activation_quant="nvfp4_row_scaled",
                 _note="routed experts are NVFP4 (ModelOpt layout, W4A4); other linears MXFP8")
    return dict(config=_wrap(text, quant), fmt_of=lambda sp: "nvfp4" if _is_expert(sp) else "mxfp8",
                input_scale=1.0 / 448.0)


@preset("mxfp8")
def _mxfp8():
    """Like the real M3-MXFP8: layer 0 dense attention + dense MLP, layers 1-3 MSA + MoE, every linear MXFP8
    (index projections included), router FP32, BF16 KV by default; hidden 384, GQA 3 (12/4); vision tensors that a
    text engine must skip."""
    text = _text_config(384, 4, 12, 4, 768, moe=[0, 1, 1, 1], msa=[0, 1, 1, 1], dense=768)
    vision = [("vision_tower.patch_embed.proj.weight", "BF16", np.zeros((16, 3, 2, 2), dtype=np.uint16)),
              ("multi_modal_projector.linear_1.weight", "BF16", np.zeros((8, 16), dtype=np.uint16))]
    return dict(config=_wrap(text, MXFP8_QUANT), fmt_of=lambda sp: "mxfp8", extra_tensors=vision)


@preset("nvfp4-w4a16")
def _w4a16():
    """Flat text-only config (model.* / lm_head.weight names): NVFP4 experts with separate w1/w3 weight_scale_2 of
    shape [1], no activation quantisation, no shared expert, router bias under gate.e_score_correction_bias, BF16
    other linears, FP8 KV by default; MHA (4/4 heads), top-3 blocks; layer 0 MSA, layer 1 dense attention."""
    text = _text_config(256, 2, 4, 4, 512, moe=[1, 1], msa=[1, 0], n_shared=0, topk_blocks=3, rsf=2.5,
                        experts=8, top_k=3)
    return dict(config=_flat(text, {"kv_cache_quant_algo": "FP8"}),
                fmt_of=lambda sp: "nvfp4" if _is_expert(sp) else "bf16", share_w13_scale2=False,
                scale2_shape=(1,), alt_bias_name=True)


@preset("m3-shape-1layer")
def _m3_shape():
    """Real per-layer shapes of M3/M3.1 (hidden 6144, 64/4 x 128 heads, 128 experts of 3072 top-4 + shared 3072,
    top-16 blocks) with one MSA + MoE layer and a 4096-token vocabulary, M3.1 formats (NVFP4 W4A4 experts, MXFP8
    elsewhere, NVFP4 KV). About 4.2 GB; for GPU kernel and layer benchmarks."""
    text = _text_config(6144, 1, 64, 4, 4096, moe=[1], msa=[1], inter=3072, shared=3072, dense=12288,
                        experts=128, top_k=4, topk_blocks=16)
    quant = dict(MXFP8_QUANT, kv_cache_quant_algo="NVFP4", moe_activation_quant="nvfp4_row_scaled")
    return dict(config=_wrap(text, quant), fmt_of=lambda sp: "nvfp4" if _is_expert(sp) else "mxfp8",
                shard_bytes=2 << 30)


CI_PRESETS = ("tiny-mix", "m31-nvfp4", "mxfp8", "nvfp4-w4a16")


def get_preset(name: str) -> dict:
    if name not in PRESETS:
        raise KeyError(f"unknown preset {name!r}; known: {', '.join(PRESETS)}")
    p = PRESETS[name]()
    p["config"] = copy.deepcopy(p["config"])
    return p


# ----------------------------------------------------------------------------------------------------------------
# Initial values: scaled so activations stay well-conditioned
# ----------------------------------------------------------------------------------------------------------------
def init_std(sp: ParamSpec) -> float:
    """Standard deviation of each tensor's random values."""
    k = sp.key
    if sp.kind == "embed":
        return 1.0
    if sp.kind == "norm":
        return 0.15  # Gemma norm multiplies by (1 + w)
    if sp.kind == "router":
        return 1.0 / math.sqrt(sp.shape[1])
    if sp.kind == "router_bias":
        return 0.1
    if sp.kind == "lm_head":
        return 2.0 / math.sqrt(sp.shape[1])
    fan_in = sp.shape[1]
    if k.endswith(("o_proj.weight", "down_proj.weight", "w2.weight")):
        return 0.6 / math.sqrt(fan_in)
    if k.endswith(("gate_proj.weight", "up_proj.weight", "w1.weight", "w3.weight")):
        return 2.5 / math.sqrt(fan_in)  # gate/up values reach the +-7 clamps now and then
    return 1.0 / math.sqrt(fan_in)


def random_value_of(seed: int):
    return lambda sp: uniform(sp.key, seed, sp.shape, init_std(sp))
