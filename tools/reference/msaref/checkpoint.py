"""Checkpoint I/O in the real layout (model.md sections 3, 4, 7): tensor names, per-tensor weight formats, loading
into MiniMaxM3ForCausalLM and writing (quantising) weights.

Storage of one linear weight W [N, K] (format decided per tensor from what is stored):
  BF16 / F16 / F32: `X.weight`
  MXFP8: `X.weight` F8_E4M3 [N, K], `X.weight_scale_inv` U8 [N, K/32] (UE8M0)
  NVFP4: `X.weight` U8 [N, K/2], `X.weight_scale` F8_E4M3 [N, K/16], `X.weight_scale_2` F32 [] or [1]
         (+ optional `X.input_scale` F32, ignored by this reference)
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass

import numpy as np
import torch

from . import formats as fm
from .config import ModelConfig, load_config
from .model import MiniMaxM3ForCausalLM, QLinear
from .safetensors_io import Checkpoint, ShardedWriter

VISION_PREFIXES = ("vision_tower.", "multi_modal_projector.", "patch_merge_mlp.", "language_model.vision_tower.")


class CheckpointError(ValueError):
    pass


@dataclass
class ParamSpec:
    key: str          # text-only name, e.g. "model.layers.3.self_attn.q_proj.weight"
    shape: tuple
    kind: str         # "embed" | "norm" | "linear" | "router" | "router_bias" | "lm_head"
    layer: int = -1


def param_specs(cfg: ModelConfig) -> list:
    """Every tensor of the text model, in checkpoint order."""
    H, Hkv, D, hid = cfg.num_heads, cfg.num_kv_heads, cfg.head_dim, cfg.hidden_size
    out = [ParamSpec("model.embed_tokens.weight", (cfg.vocab_size, hid), "embed")]

    def lin(key, n, k, layer):
        out.append(ParamSpec(key + ".weight", (n, k), "linear", layer))

    for i in range(cfg.num_layers):
        p = f"model.layers.{i}."
        out.append(ParamSpec(p + "input_layernorm.weight", (hid,), "norm", i))
        a = p + "self_attn."
        lin(a + "q_proj", H * D, hid, i)
        lin(a + "k_proj", Hkv * D, hid, i)
        lin(a + "v_proj", Hkv * D, hid, i)
        lin(a + "o_proj", hid, H * D, i)
        out.append(ParamSpec(a + "q_norm.weight", (D,), "norm", i))
        out.append(ParamSpec(a + "k_norm.weight", (D,), "norm", i))
        if cfg.msa_layers[i]:
            lin(a + "index_q_proj", cfg.num_index_heads * cfg.index_dim, hid, i)
            lin(a + "index_k_proj", cfg.index_dim, hid, i)
            out.append(ParamSpec(a + "index_q_norm.weight", (cfg.index_dim,), "norm", i))
            out.append(ParamSpec(a + "index_k_norm.weight", (cfg.index_dim,), "norm", i))
        out.append(ParamSpec(p + "post_attention_layernorm.weight", (hid,), "norm", i))
        if cfg.moe_layers[i]:
            m = p + "block_sparse_moe."
            out.append(ParamSpec(m + "gate.weight", (cfg.num_experts, hid), "router", i))
            out.append(ParamSpec(m + "e_score_correction_bias", (cfg.num_experts,), "router_bias", i))
            for e in range(cfg.num_experts):
                x = m + f"experts.{e}."
                lin(x + "w1", cfg.intermediate_size, hid, i)
                lin(x + "w3", cfg.intermediate_size, hid, i)
                lin(x + "w2", hid, cfg.intermediate_size, i)
            if cfg.n_shared_experts:
                s = m + "shared_experts."
                lin(s + "gate_proj", cfg.shared_intermediate_size, hid, i)
                lin(s + "up_proj", cfg.shared_intermediate_size, hid, i)
                lin(s + "down_proj", hid, cfg.shared_intermediate_size, i)
        else:
            s = p + "mlp."
            lin(s + "gate_proj", cfg.dense_intermediate_size, hid, i)
            lin(s + "up_proj", cfg.dense_intermediate_size, hid, i)
            lin(s + "down_proj", hid, cfg.dense_intermediate_size, i)
    out.append(ParamSpec("model.norm.weight", (hid,), "norm"))
    if not cfg.tie_word_embeddings:
        out.append(ParamSpec("lm_head.weight", (cfg.vocab_size, hid), "lm_head"))
    return out


def stored_name(key: str, wrapped: bool) -> str:
    return "language_model." + key if wrapped else key


# ----------------------------------------------------------------------------------------------------------------
# Loading
# ----------------------------------------------------------------------------------------------------------------
def _to_float(dtype: str, arr: np.ndarray) -> torch.Tensor:
    if dtype == "BF16":
        return fm.bf16_bits_to_float(arr)
    if dtype in ("F16", "F32", "F64"):
        return torch.from_numpy(np.ascontiguousarray(arr).astype(np.float32))
    raise CheckpointError(f"dtype {dtype} is not a float dtype")


def load_linear(ck: Checkpoint, name: str, shape: tuple):
    """Returns (float32 weight [N, K], fmt, nvfp4 scale_2 or None). `name` ends in '.weight'."""
    base = name[:-len(".weight")]
    info = ck.info(name)
    N, K = shape
    if info.dtype == "F8_E4M3" and base + ".weight_scale_inv" in ck:
        si = ck.info(base + ".weight_scale_inv")
        if info.shape != (N, K) or si.dtype != "U8" or si.shape != (N, K // fm.MX_BLOCK) or K % fm.MX_BLOCK:
            raise CheckpointError(f"{name}: MXFP8 shapes {info.shape}/{si.shape} do not match [{N}, {K}] / "
                                  f"[{N}, {K // 32}] (or scale dtype {si.dtype} is not U8)")
        w = fm.mxfp8_dequant(torch.from_numpy(ck.get(name)), torch.from_numpy(ck.get(base + ".weight_scale_inv")))
        return w, "mxfp8", None
    if info.dtype == "U8" and base + ".weight_scale" in ck and base + ".weight_scale_2" in ck:
        s1, s2 = ck.info(base + ".weight_scale"), ck.info(base + ".weight_scale_2")
        if (info.shape != (N, K // 2) or s1.dtype != "F8_E4M3" or s1.shape != (N, K // fm.NVFP4_BLOCK)
                or s2.dtype != "F32" or s2.shape not in ((), (1,)) or K % fm.NVFP4_BLOCK):
            raise CheckpointError(f"{name}: NVFP4 tensors do not match [{N}, {K}] (weight {info.shape}, "
                                  f"weight_scale {s1.dtype} {s1.shape}, weight_scale_2 {s2.dtype} {s2.shape})")
        scale_2 = float(ck.get(base + ".weight_scale_2").reshape(()))
        w = fm.nvfp4_weight_dequant(torch.from_numpy(ck.get(name)), torch.from_numpy(ck.get(base + ".weight_scale")),
                                    scale_2)
        return w, "nvfp4", scale_2
    if info.dtype in ("BF16", "F16", "F32"):
        if info.shape != (N, K):
            raise CheckpointError(f"{name}: shape {info.shape} is not [{N}, {K}]")
        return _to_float(info.dtype, ck.get(name)), info.dtype.lower(), None
    raise CheckpointError(f"{name}: stored as {info.dtype} without the scales of a known format "
                          f"(MXFP8 needs weight_scale_inv, NVFP4 weight_scale and weight_scale_2)")


def load_model(model_dir: str, device="cpu", dtype=torch.float32, strict: bool = True):
    """Load config.json + safetensors into a MiniMaxM3ForCausalLM (eval mode). Returns (model, cfg)."""
    cfg = load_config(model_dir)
    ck = Checkpoint(model_dir)
    wrapped = cfg.wrapped
    # A VL config may still ship text-only names and vice versa: decide from the embedding's name.
    if stored_name("model.embed_tokens.weight", wrapped) not in ck:
        if stored_name("model.embed_tokens.weight", not wrapped) in ck:
            wrapped = not wrapped
        else:
            raise CheckpointError(f"{model_dir}: no embed_tokens.weight under 'language_model.model.' or 'model.'")
    model = MiniMaxM3ForCausalLM(cfg)
    modules = dict(model.named_modules())
    params = dict(model.named_parameters())
    used = set()
    for sp in param_specs(cfg):
        name = stored_name(sp.key, wrapped)
        if sp.kind == "router_bias" and name not in ck:
            alt = name.replace("block_sparse_moe.e_score_correction_bias",
                               "block_sparse_moe.gate.e_score_correction_bias")
            name = alt if alt in ck else name
        if name not in ck:
            raise CheckpointError(f"{model_dir}: tensor '{name}' is missing")
        if sp.kind == "linear" or sp.kind == "lm_head":
            w, fmt, s2 = load_linear(ck, name, sp.shape)
            mod = modules[sp.key[:-len(".weight")]]
            assert isinstance(mod, QLinear)
            mod.fmt, mod.nvfp4_scale_2 = fmt, s2
            base = name[:-len(".weight")]
            used.update(n for n in (name, base + ".weight_scale_inv", base + ".weight_scale",
                                    base + ".weight_scale_2", base + ".input_scale") if n in ck)
        else:
            info = ck.info(name)
            if info.shape != sp.shape:
                raise CheckpointError(f"{name}: shape {info.shape} is not {list(sp.shape)}")
            w = _to_float(info.dtype, ck.get(name))
            used.add(name)
        params[sp.key].data.copy_(w.reshape(sp.shape))
    if cfg.tie_word_embeddings:
        model.lm_head.weight.data.copy_(model.model.embed_tokens.weight.data)
    if strict:
        extra = [n for n in ck.names() if n not in used and not n.startswith(VISION_PREFIXES)]
        if extra:
            raise CheckpointError(f"{model_dir}: {len(extra)} tensors are not part of the model, e.g. {extra[:3]}")
    model.eval()
    return model.to(device=device, dtype=dtype), cfg


# ----------------------------------------------------------------------------------------------------------------
# Writing
# ----------------------------------------------------------------------------------------------------------------
def encode_linear(name: str, w: torch.Tensor, fmt: str, scale_2: float | None = None,
                  input_scale: float | None = None) -> list:
    """Quantise W [N, K] for storage. Returns [(stored name, safetensors dtype, numpy array)]."""
    base = name[:-len(".weight")]
    if fmt == "bf16":
        return [(name, "BF16", fm.float_to_bf16_bits(w))]
    if fmt == "f32":
        return [(name, "F32", w.float().numpy())]
    if fmt == "f16":
        return [(name, "F16", w.float().numpy().astype(np.float16))]
    if fmt == "mxfp8":
        q = fm.mxfp8_quantize(w.double())
        return [(name, "F8_E4M3", q.codes.numpy()), (base + ".weight_scale_inv", "U8", q.exponents.numpy())]
    if fmt == "nvfp4":
        q = fm.nvfp4_weight_quantize(w.float(), scale_2)
        out = [(name, "U8", q.packed.numpy()), (base + ".weight_scale", "F8_E4M3", q.scale_codes.numpy()),
               (base + ".weight_scale_2", "F32", np.array(q.scale_2, dtype=np.float32))]
        if input_scale is not None:
            out.append((base + ".input_scale", "F32", np.array(input_scale, dtype=np.float32)))
        return out
    raise ValueError(f"unknown weight format {fmt!r}")


def write_checkpoint(out_dir: str, config: dict, cfg: ModelConfig, value_of, fmt_of, *, share_w13_scale2=True,
                     scale2_shape=(), input_scale: float | None = None, alt_bias_name: bool = False,
                     extra_tensors=(), shard_bytes: int = 1 << 30, generation_config: dict | None = None,
                     scale2_of=None, lm_head_fmt: str = "bf16"):
    """Write a checkpoint directory in the real layout.
    value_of(ParamSpec) -> float tensor; fmt_of(ParamSpec) -> "bf16" | "f32" | "mxfp8" | "nvfp4" for linears.
    Norms, embeddings and lm_head are BF16 (lm_head may be quantised through fmt_of), router gate and bias FP32.
    NVFP4 experts: w1/w3 share one weight_scale_2 (max of their amax / 2688) when share_w13_scale2; scale2_of(spec)
    (optional) returns a weight_scale_2 to use instead (e.g. the one a loaded model carries). lm_head is written in
    lm_head_fmt (BF16 as in the real checkpoints unless asked otherwise)."""
    wrapped = "text_config" in config
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    if generation_config is not None:
        with open(os.path.join(out_dir, "generation_config.json"), "w") as f:
            json.dump(generation_config, f, indent=2)
            f.write("\n")
    wr = ShardedWriter(out_dir, shard_bytes)
    specs = param_specs(cfg)
    pending_w1 = {}
    for sp in specs:
        name = stored_name(sp.key, wrapped)
        if sp.kind in ("embed", "norm"):
            wr.add(name, "BF16", fm.float_to_bf16_bits(value_of(sp)))
        elif sp.kind == "router":
            wr.add(name, "F32", value_of(sp).float().numpy())
        elif sp.kind == "router_bias":
            if alt_bias_name:
                name = name.replace("e_score_correction_bias", "gate.e_score_correction_bias")
            wr.add(name, "F32", value_of(sp).float().numpy())
        else:  # linear, lm_head
            fmt = fmt_of(sp) if sp.kind == "linear" else lm_head_fmt
            w = value_of(sp)
            s2 = scale2_of(sp) if (scale2_of is not None and fmt == "nvfp4") else None
            if s2 is None and fmt == "nvfp4" and share_w13_scale2 and (sp.key.endswith(".w1.weight") or
                                                         sp.key.endswith(".w3.weight")):
                # M3.1's recipe: one global scale for FC1 (w1 and w3); w1 comes first, w3 right after it.
                if sp.key.endswith(".w1.weight"):
                    w3key = sp.key[:-len("w1.weight")] + "w3.weight"
                    w3 = value_of(ParamSpec(w3key, sp.shape, "linear", sp.layer))
                    amax = max(float(w.abs().max()), float(w3.abs().max()))
                    s2 = fm.nvfp4_weight_global_scale(amax)
                    pending_w1[w3key] = (s2, w3)
                else:
                    s2, w = pending_w1.pop(sp.key, (None, w))
            if scale2_shape == (1,) and fmt == "nvfp4":
                for n, dt, arr in encode_linear(name, w, fmt, s2, input_scale):
                    wr.add(n, dt, arr.reshape(1) if n.endswith("weight_scale_2") else arr)
            else:
                for n, dt, arr in encode_linear(name, w, fmt, s2, input_scale if fmt == "nvfp4" else None):
                    wr.add(n, dt, arr)
    for n, dt, arr in extra_tensors:
        wr.add(n, dt, arr)
    return wr.close()


def model_value_of(model: MiniMaxM3ForCausalLM):
    """value_of for write_checkpoint from a model's parameters (e.g. a trained model)."""
    params = dict(model.named_parameters())
    return lambda sp: params[sp.key].detach().float().cpu()


def model_fmt_of(model: MiniMaxM3ForCausalLM):
    mods = dict(model.named_modules())
    return lambda sp: mods[sp.key[:-len(".weight")]].fmt


def model_scale2_of(model: MiniMaxM3ForCausalLM):
    mods = dict(model.named_modules())
    return lambda sp: mods[sp.key[:-len(".weight")]].nvfp4_scale_2
