"""The checkpoint generator and loader: real names and dtypes, round trips, determinism, clear errors, and that the
committed goldens were made from exactly the checkpoints the generator makes today."""
import json
import os

import numpy as np
import pytest
import torch

from gen_checkpoint import generate
from helpers import small_config
from msaref import formats as fm
from msaref.checkpoint import (CheckpointError, load_model, model_fmt_of, model_scale2_of, model_value_of,
                               param_specs, write_checkpoint)
from msaref.config import parse_config
from msaref.model import MiniMaxM3ForCausalLM
from msaref.presets import CI_PRESETS, get_preset, random_value_of
from msaref.safetensors_io import Checkpoint

GOLDENS = os.path.join(os.path.dirname(__file__), "..", "..", "..", "tests", "reference", "goldens")


def test_param_specs_are_the_model_parameters():
    for preset in CI_PRESETS + ("m3-shape-1layer",):
        cfg = parse_config(get_preset(preset)["config"])
        specs = {sp.key: tuple(sp.shape) for sp in param_specs(cfg)}
        if preset == "m3-shape-1layer":  # too large to instantiate here: check a few shapes
            assert specs["model.layers.0.block_sparse_moe.experts.127.w2.weight"] == (6144, 3072)
            assert specs["model.layers.0.self_attn.index_q_proj.weight"] == (512, 6144)
            assert specs["model.layers.0.self_attn.q_proj.weight"] == (8192, 6144)
            continue
        model = MiniMaxM3ForCausalLM(cfg)
        assert specs == {k: tuple(v.shape) for k, v in model.named_parameters()}


def expected_values(preset_name, cfg, p):
    """What the loader must produce: the generator's values quantised and dequantised in each tensor's format."""
    val = random_value_of(0)
    out = {}
    specs = param_specs(cfg)
    by_key = {sp.key: sp for sp in specs}
    for sp in specs:
        v = val(sp)
        if sp.kind in ("router", "router_bias"):
            out[sp.key] = v
        elif sp.kind in ("embed", "norm", "lm_head"):
            out[sp.key] = fm.bf16(v)
        else:
            fmt = p["fmt_of"](sp)
            if fmt == "bf16":
                out[sp.key] = fm.bf16(v)
            elif fmt == "mxfp8":
                out[sp.key] = fm.mxfp8_fake_quant(v.double()).float()
            else:
                s2 = None
                if p.get("share_w13_scale2", True) and (sp.key.endswith("w1.weight") or sp.key.endswith("w3.weight")):
                    other = sp.key[:-len("w1.weight")] + ("w3.weight" if sp.key.endswith("w1.weight") else "w1.weight")
                    amax = max(float(v.abs().max()), float(val(by_key[other]).abs().max()))
                    s2 = fm.nvfp4_weight_global_scale(amax)
                out[sp.key] = fm.nvfp4_weight_quantize(v, s2).dequant()
    return out


@pytest.mark.parametrize("preset", CI_PRESETS)
def test_generate_load_export_round_trip(tmp_path, preset):
    d = str(tmp_path / "ck")
    generate(d, preset)
    p = get_preset(preset)
    cfg_json = json.load(open(os.path.join(d, "config.json")))
    assert cfg_json == p["config"]
    assert os.path.exists(os.path.join(d, "generation_config.json"))
    ck = Checkpoint(d)
    wrapped = "text_config" in cfg_json
    pre = "language_model." if wrapped else ""
    names = ck.names()
    assert (pre + "model.embed_tokens.weight") in names and (pre + "lm_head.weight") in names
    assert len({ck.where[n] for n in names}) > 1  # really sharded
    # dtypes as model.md sections 3, 4 and 7 describe
    assert ck.info(pre + "model.norm.weight").dtype == "BF16"
    assert ck.info(pre + "lm_head.weight").dtype == "BF16" and ck.info(pre + "model.embed_tokens.weight").dtype == "BF16"
    for n in names:
        i = ck.info(n)
        if n.endswith("block_sparse_moe.gate.weight"):
            assert i.dtype == "F32"
        if n.endswith("e_score_correction_bias"):
            assert i.dtype == "F32" and (n.endswith("gate.e_score_correction_bias") == bool(p.get("alt_bias_name")))
        if n.endswith("weight_scale_inv"):
            assert i.dtype == "U8" and ck.info(n[:-len("_scale_inv")]).dtype == "F8_E4M3"
        if n.endswith("weight_scale_2"):
            assert i.dtype == "F32" and i.shape == p.get("scale2_shape", ())
            assert ck.info(n[:-2]).dtype == "F8_E4M3" and ck.info(n[:-len("_scale_2")]).dtype == "U8"
        if ".experts." in n and n.endswith("w1.weight_scale_2"):
            same = ck.get(n) == ck.get(n.replace("w1.", "w3."))
            assert bool(same) == p.get("share_w13_scale2", True)
        if n.endswith("input_scale"):
            assert "input_scale" in p
    if preset == "mxfp8":
        assert any(n.startswith("vision_tower.") for n in names)
        assert ck.info(pre + "model.layers.1.self_attn.index_q_proj.weight_scale_inv").dtype == "U8"

    model, cfg = load_model(d)
    exp = expected_values(preset, cfg, p)
    for k, v in model.named_parameters():
        assert torch.equal(v.data, exp[k]), k

    # export the loaded model and load it again: identical for BF16/MXFP8, NVFP4 within one E2M1 step
    d2 = str(tmp_path / "ck2")
    write_checkpoint(d2, cfg_json, cfg, model_value_of(model), model_fmt_of(model), scale2_of=model_scale2_of(model),
                     scale2_shape=p.get("scale2_shape", ()), alt_bias_name=p.get("alt_bias_name", False),
                     shard_bytes=1 << 22)
    model2, _ = load_model(d2)
    mods = dict(model.named_modules())
    for (k, v), (k2, v2) in zip(model.named_parameters(), model2.named_parameters()):
        fmt = getattr(mods.get(k[:-len(".weight")]), "fmt", None)
        if fmt == "nvfp4":
            assert float((v - v2).abs().max()) <= 2 * float(v.abs().max()) / 6 + 1e-6, k
        else:
            assert torch.equal(v, v2), k


def test_generation_is_deterministic(tmp_path):
    a = generate(str(tmp_path / "a"), "nvfp4-w4a16")
    b = generate(str(tmp_path / "b"), "nvfp4-w4a16")
    assert a == b
    c = generate(str(tmp_path / "c"), "nvfp4-w4a16", seed=1)
    assert c["model-00001-of-00002.safetensors"] != a["model-00001-of-00002.safetensors"]


def test_custom_config_and_overrides(tmp_path):
    d = str(tmp_path / "x")
    generate(d, config=small_config(), weights="m31",
             sets=[("num_hidden_layers", 2), ("moe_layer_freq", [0, 1]),
                   ("sparse_attention_config.sparse_attention_freq", [1, 0])])
    model, cfg = load_model(d)
    assert cfg.num_layers == 2 and cfg.msa_layers == [True, False]
    assert model.model.layers[1].block_sparse_moe.experts[0].w1.fmt == "nvfp4"
    assert model.model.layers[0].mlp.gate_proj.fmt == "mxfp8"


def test_loader_errors(tmp_path):
    d = str(tmp_path / "ck")
    generate(d, "nvfp4-w4a16")
    idx_path = os.path.join(d, "model.safetensors.index.json")
    idx = json.load(open(idx_path))
    # a missing tensor
    bad = json.loads(json.dumps(idx))
    del bad["weight_map"]["model.layers.0.self_attn.k_norm.weight"]
    json.dump(bad, open(idx_path, "w"))
    with pytest.raises(CheckpointError, match="k_norm.weight' is missing"):
        load_model(d)
    # an extra text tensor is an error, a vision tensor is skipped
    from msaref.safetensors_io import write_file
    write_file(os.path.join(d, "extra.safetensors"), {"model.layers.0.mystery.weight": ("F32", np.zeros(2, np.float32)),
                                                      "vision_tower.x": ("F32", np.zeros(2, np.float32))})
    idx["weight_map"]["model.layers.0.mystery.weight"] = "extra.safetensors"
    idx["weight_map"]["vision_tower.x"] = "extra.safetensors"
    json.dump(idx, open(idx_path, "w"))
    with pytest.raises(CheckpointError, match="not part of the model"):
        load_model(d)
    load_model(d, strict=False)
    # a tensor with the wrong shape
    write_file(os.path.join(d, "extra.safetensors"), {"model.layers.0.mystery.weight": ("F32", np.zeros(2, np.float32)),
                                                      "vision_tower.x": ("F32", np.zeros(2, np.float32)),
                                                      "model.norm.weight": ("BF16", np.zeros(3, np.uint16))})
    idx["weight_map"]["model.norm.weight"] = "extra.safetensors"
    json.dump(idx, open(idx_path, "w"))
    with pytest.raises(CheckpointError, match="shape"):
        load_model(d, strict=False)


def _golden_presets():
    if not os.path.isdir(GOLDENS):
        return []
    return sorted(p for p in os.listdir(GOLDENS) if os.path.exists(os.path.join(GOLDENS, p, "manifest.json")))


@pytest.mark.parametrize("preset", _golden_presets())
def test_goldens_checkpoints_regenerate_bit_identically(tmp_path, preset):
    """The C++ parity tests regenerate each checkpoint with gen_checkpoint.py; it must be the one the goldens used."""
    man = json.load(open(os.path.join(GOLDENS, preset, "manifest.json")))
    assert generate(str(tmp_path / preset), preset) == man["checkpoint_sha256"]
