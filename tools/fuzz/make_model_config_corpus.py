#!/usr/bin/python3
"""Writes the seed corpus of fuzz/fuzz_model_config: the real M3 config (VL wrapper and flattened), small flat
configs of the family (MoE + MSA, dense only), and broken variants (one validation rule each).

Usage: /usr/bin/python3 tools/fuzz/make_model_config_corpus.py   (run from the repository root)
"""
import copy
import json
import os

OUT = "fuzz/corpus/fuzz_model_config/"


def main():
    os.makedirs(OUT, exist_ok=True)
    m3 = json.load(open("examples/minimax-m3/config.json"))
    small = {"hidden_size": 64, "intermediate_size": 32, "num_hidden_layers": 4, "num_attention_heads": 4,
             "num_key_value_heads": 2, "head_dim": 32, "vocab_size": 96, "max_position_embeddings": 8192,
             "rms_norm_eps": 1e-6, "use_gemma_norm": True, "rope_theta": 10000.0, "rotary_dim": 16,
             "hidden_act": "swigluoai", "use_qk_norm": True, "qk_norm_type": "per_head",
             "dense_intermediate_size": 96, "shared_intermediate_size": 64, "num_local_experts": 4,
             "num_experts_per_tok": 2, "n_shared_experts": 1, "scoring_func": "sigmoid", "use_routing_bias": True,
             "routed_scaling_factor": 2.0, "moe_layer_freq": [0, 1, 1, 1],
             "sparse_attention_config": {"use_sparse_attention": True, "sparse_index_dim": 32,
                                         "sparse_num_index_heads": 2, "sparse_topk_blocks": 4,
                                         "sparse_block_size": 128, "sparse_score_type": "max",
                                         "sparse_attention_freq": [0, 0, 1, 1]}}
    moe_only = ("moe_layer_freq", "sparse_attention_config", "intermediate_size", "shared_intermediate_size",
                "num_local_experts", "num_experts_per_tok", "n_shared_experts", "scoring_func", "use_routing_bias",
                "routed_scaling_factor")
    flat = dict(m3["text_config"])
    flat["quantization_config"] = {"kv_cache_quant_algo": "NVFP4", "moe_activation_quant": "nvfp4_row_scaled"}
    files = {
        "valid_m3_wrapper.json": m3,
        "valid_m3_flat.json": flat,
        "valid_small_flat.json": small,
        "valid_small_dense.json": {k: v for k, v in small.items() if k not in moe_only},
        "bad_not_json.json": '{"hidden_size": 64,',
        "bad_array.json": [1, 2],
    }

    def variant(base, edit):
        doc = copy.deepcopy(base)
        edit(doc)
        return doc

    files["bad_missing_head_dim.json"] = variant(small, lambda d: d.pop("head_dim"))
    files["bad_short_layer_array.json"] = variant(small, lambda d: d.update(moe_layer_freq=[0, 1]))
    files["bad_index_dim.json"] = variant(small, lambda d: d["sparse_attention_config"].update(sparse_index_dim=16))
    files["bad_rotary_dim.json"] = variant(small, lambda d: d.update(rotary_dim=64))
    files["bad_huge_layers.json"] = variant(small, lambda d: d.update(num_hidden_layers=2**40))
    files["bad_many_layers.json"] = variant(small, lambda d: (d.pop("moe_layer_freq"), d.pop("sparse_attention_config"),
                                                              d.update(num_hidden_layers=1_000_000_000)))
    files["bad_init_block.json"] = variant(
        m3, lambda d: d["text_config"]["sparse_attention_config"].update(sparse_init_block=1))
    files["bad_kv_algo.json"] = variant(m3, lambda d: d["quantization_config"].update(kv_cache_quant_algo="INT4"))
    for name, doc in files.items():
        with open(OUT + name, "w") as f:
            f.write(doc if isinstance(doc, str) else json.dumps(doc))
    print(f"wrote {len(files)} files to {OUT}")


if __name__ == "__main__":
    main()
