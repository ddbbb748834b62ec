"""Small random models for the self-tests (in memory, no checkpoint needed)."""
import copy

import torch

from msaref.checkpoint import param_specs
from msaref.config import parse_config
from msaref.formats import bf16
from msaref.model import MiniMaxM3ForCausalLM
from msaref.presets import _text_config, _wrap, random_value_of


def small_config(**kw):
    """A fast config: hidden 64, head_dim 32, 16-token blocks, top-3 blocks, every (attention, FFN) pair."""
    args = dict(hidden=64, layers=4, heads=4, kv_heads=2, vocab=97, moe=[0, 1, 0, 1], msa=[0, 1, 1, 0], inter=32,
                shared=32, dense=64, experts=4, top_k=2, topk_blocks=3, head_dim=32, rotary_dim=16)
    args.update(kw)
    block = args.pop("block", 16)
    text = _text_config(args.pop("hidden"), args.pop("layers"), args.pop("heads"), args.pop("kv_heads"),
                        args.pop("vocab"), **args)
    text["sparse_attention_config"]["sparse_block_size"] = block
    return _wrap(text, {"kv_cache_quant_algo": "NVFP4"})


def small_model(config=None, seed=0, dtype=torch.float32, w4a4=False):
    cfg_json = copy.deepcopy(config or small_config())
    if w4a4:
        cfg_json["quantization_config"]["moe_activation_quant"] = "nvfp4_row_scaled"
    cfg = parse_config(cfg_json)
    m = MiniMaxM3ForCausalLM(cfg)
    params = dict(m.named_parameters())
    val = random_value_of(seed)
    for sp in param_specs(cfg):
        params[sp.key].data.copy_(bf16(val(sp)) if sp.kind not in ("router", "router_bias") else val(sp))
    return m.eval().to(dtype), cfg


def rel_err(a, b):
    return float((a.double() - b.double()).abs().max() / b.double().abs().max())
