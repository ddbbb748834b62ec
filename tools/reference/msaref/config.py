"""config.json (model.md sections 1, 6, 7) -> ModelConfig, with the checks model.md section 7 asks for."""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field


class ConfigError(ValueError):
    pass


KV_DTYPES = ("nvfp4", "fp8", "bf16")


@dataclass
class ModelConfig:
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    vocab_size: int
    rms_norm_eps: float
    rope_theta: float
    rotary_dim: int
    swiglu_alpha: float
    swiglu_limit: float
    tie_word_embeddings: bool
    moe_layers: list            # bool per layer: MoE (True) or dense MLP (False)
    msa_layers: list            # bool per layer: MSA (True) or dense attention (False)
    dense_intermediate_size: int = 0
    intermediate_size: int = 0
    shared_intermediate_size: int = 0
    num_experts: int = 0
    top_k_experts: int = 0
    n_shared_experts: int = 0
    use_routing_bias: bool = True
    routed_scaling_factor: float = 1.0
    index_dim: int = 0
    num_index_heads: int = 0
    topk_blocks: int = 0
    block_size: int = 128
    kv_cache_quant_algo: str = "bf16"       # default KV dtype: "nvfp4" | "fp8" | "bf16"
    moe_activation_quant: str | None = None  # "nvfp4_row_scaled" or None
    raw: dict = field(default_factory=dict, repr=False)   # the text config as read
    wrapped: bool = False                                 # VL wrapper (text_config) or flat

    @property
    def gqa(self) -> int:
        return self.num_heads // self.num_kv_heads

    @property
    def w4a4(self) -> bool:
        return self.moe_activation_quant == "nvfp4_row_scaled"


def _req(d: dict, key: str, where: str):
    if key not in d:
        raise ConfigError(f"config.json: required field '{where}{key}' is missing")
    return d[key]


def _per_layer(value, n: int, name: str) -> list:
    if not isinstance(value, list) or len(value) != n or any(v not in (0, 1, True, False) for v in value):
        raise ConfigError(f"config.json: '{name}' must be a list of {n} values 0/1 (one per layer), got {value!r}")
    return [bool(v) for v in value]


def parse_config(cfg: dict) -> ModelConfig:
    wrapped = "text_config" in cfg
    t = cfg["text_config"] if wrapped else cfg
    if not isinstance(t, dict):
        raise ConfigError("config.json: 'text_config' is not an object")
    qc = cfg.get("quantization_config") or t.get("quantization_config") or {}
    p = "text_config." if wrapped else ""

    hidden = int(_req(t, "hidden_size", p))
    n_layers = int(_req(t, "num_hidden_layers", p))
    n_heads = int(_req(t, "num_attention_heads", p))
    n_kv = int(_req(t, "num_key_value_heads", p))
    head_dim = int(_req(t, "head_dim", p))
    if n_heads % n_kv:
        raise ConfigError("config.json: num_attention_heads must be a multiple of num_key_value_heads")
    if "rotary_dim" in t:
        rot = int(t["rotary_dim"])
        if "partial_rotary_factor" in t and abs(t["partial_rotary_factor"] * head_dim - rot) > 1e-9:
            raise ConfigError("config.json: rotary_dim and partial_rotary_factor * head_dim disagree")
    elif "partial_rotary_factor" in t:
        rot = int(round(t["partial_rotary_factor"] * head_dim))
    else:
        raise ConfigError(f"config.json: required field '{p}rotary_dim' is missing")
    if rot % 2 or rot > head_dim or rot <= 0:
        raise ConfigError(f"config.json: rotary_dim {rot} must be even and in (0, head_dim]")
    if t.get("rope_scaling"):
        raise ConfigError("config.json: rope_scaling is not supported by this model family")
    if _req(t, "hidden_act", p) != "swigluoai":
        raise ConfigError(f"config.json: hidden_act {t['hidden_act']!r} is not 'swigluoai'")
    if not _req(t, "use_gemma_norm", p):
        raise ConfigError("config.json: use_gemma_norm false is not supported (the family uses Gemma RMSNorm)")
    if not _req(t, "use_qk_norm", p) or _req(t, "qk_norm_type", p) != "per_head":
        raise ConfigError("config.json: only use_qk_norm true with qk_norm_type 'per_head' is supported")
    if t.get("attention_output_gate", False):
        raise ConfigError("config.json: attention_output_gate true is not supported")

    moe = _per_layer(_req(t, "moe_layer_freq", p), n_layers, p + "moe_layer_freq")
    sc = t.get("sparse_attention_config")
    if sc is None:
        msa = [False] * n_layers
        sc = {}
    else:
        sp = p + "sparse_attention_config."
        msa = _per_layer(_req(sc, "sparse_attention_freq", sp), n_layers, sp + "sparse_attention_freq")
        if not _req(sc, "use_sparse_attention", sp):
            msa = [False] * n_layers
    c = ModelConfig(
        hidden_size=hidden, num_layers=n_layers, num_heads=n_heads, num_kv_heads=n_kv, head_dim=head_dim,
        vocab_size=int(_req(t, "vocab_size", p)), rms_norm_eps=float(_req(t, "rms_norm_eps", p)),
        rope_theta=float(_req(t, "rope_theta", p)), rotary_dim=rot,
        swiglu_alpha=float(_req(t, "swiglu_alpha", p)), swiglu_limit=float(_req(t, "swiglu_limit", p)),
        tie_word_embeddings=bool(t.get("tie_word_embeddings", False)), moe_layers=moe, msa_layers=msa,
        raw=t, wrapped=wrapped)
    if not all(moe):
        c.dense_intermediate_size = int(_req(t, "dense_intermediate_size", p))
    if any(moe):
        c.intermediate_size = int(_req(t, "intermediate_size", p))
        c.num_experts = int(_req(t, "num_local_experts", p))
        c.top_k_experts = int(_req(t, "num_experts_per_tok", p))
        c.n_shared_experts = int(_req(t, "n_shared_experts", p))
        if c.n_shared_experts not in (0, 1):
            raise ConfigError("config.json: n_shared_experts must be 0 or 1")
        if c.n_shared_experts:
            c.shared_intermediate_size = int(_req(t, "shared_intermediate_size", p))
        if _req(t, "scoring_func", p) != "sigmoid":
            raise ConfigError(f"config.json: scoring_func {t['scoring_func']!r} is not 'sigmoid'")
        c.use_routing_bias = bool(_req(t, "use_routing_bias", p))
        c.routed_scaling_factor = float(_req(t, "routed_scaling_factor", p))
        if not 0 < c.top_k_experts <= c.num_experts:
            raise ConfigError("config.json: num_experts_per_tok must be in [1, num_local_experts]")
    if any(msa):
        sp = p + "sparse_attention_config."
        c.index_dim = int(_req(sc, "sparse_index_dim", sp))
        c.num_index_heads = int(_req(sc, "sparse_num_index_heads", sp))
        c.topk_blocks = int(_req(sc, "sparse_topk_blocks", sp))
        c.block_size = int(_req(sc, "sparse_block_size", sp))
        if _req(sc, "sparse_score_type", sp) != "max":
            raise ConfigError("config.json: sparse_score_type must be 'max'")
        if int(_req(sc, "sparse_init_block", sp)) != 0:
            raise ConfigError("config.json: sparse_init_block must be 0 (sink blocks are not supported)")
        if int(_req(sc, "sparse_local_block", sp)) != 1:
            raise ConfigError("config.json: sparse_local_block must be 1")
        if c.index_dim != head_dim:
            raise ConfigError("config.json: sparse_index_dim must equal head_dim")
        if c.num_index_heads != n_kv:
            raise ConfigError("config.json: sparse_num_index_heads must equal num_key_value_heads")
        if c.topk_blocks < 1:
            raise ConfigError("config.json: sparse_topk_blocks must be >= 1")
    kvq = qc.get("kv_cache_quant_algo")
    c.kv_cache_quant_algo = {"NVFP4": "nvfp4", "FP8": "fp8", None: "bf16"}.get(kvq, "?")
    if c.kv_cache_quant_algo == "?":
        raise ConfigError(f"config.json: quantization_config.kv_cache_quant_algo {kvq!r} is not NVFP4, FP8 or absent")
    maq = qc.get("moe_activation_quant")
    if maq not in (None, "nvfp4_row_scaled"):
        raise ConfigError(f"config.json: quantization_config.moe_activation_quant {maq!r} is unknown")
    c.moe_activation_quant = maq
    return c


def load_config(model_dir: str) -> ModelConfig:
    path = os.path.join(model_dir, "config.json")
    try:
        with open(path) as f:
            cfg = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise ConfigError(f"{path}: cannot read ({e})") from e
    return parse_config(cfg)
