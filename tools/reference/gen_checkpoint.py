#!/usr/bin/python3
"""Generate a random MiniMax-M3-family checkpoint in the real layout (config.json, generation_config.json, sharded
safetensors with model.safetensors.index.json and the real tensor names and dtypes).

  /usr/bin/python3 tools/reference/gen_checkpoint.py --preset tiny-mix --out /tmp/tiny-mix
  /usr/bin/python3 tools/reference/gen_checkpoint.py --list
  /usr/bin/python3 tools/reference/gen_checkpoint.py --preset tiny-mix --set num_hidden_layers=2 \
      --set moe_layer_freq='[0,1]' --set sparse_attention_config.sparse_attention_freq='[1,1]' --out DIR
  /usr/bin/python3 tools/reference/gen_checkpoint.py --config my_config.json --weights mxfp8 --out DIR

Output is bit-identical for the same arguments on any machine (see msaref/presets.py). Prints a JSON object with the
SHA-256 of every written file.
"""
import argparse
import hashlib
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from msaref.checkpoint import write_checkpoint  # noqa: E402
from msaref.config import parse_config  # noqa: E402
from msaref.presets import PRESETS, get_preset, random_value_of  # noqa: E402

GENERATION_CONFIG = {"bos_token_id": 1, "eos_token_id": 2, "do_sample": True, "temperature": 1.0, "top_p": 0.95,
                     "top_k": 40}

WEIGHT_SCHEMES = {
    "bf16": lambda sp: "bf16",
    "mxfp8": lambda sp: "mxfp8",
    "nvfp4-experts": lambda sp: "nvfp4" if ".experts." in sp.key else "bf16",
    "m31": lambda sp: "nvfp4" if ".experts." in sp.key else "mxfp8",
}


def _set(cfg: dict, path: str, value):
    """--set a.b=value on the text config (text_config when wrapped), or on the top level with a leading '/'."""
    root = cfg
    if path.startswith("/"):
        path = path[1:]
    elif "text_config" in cfg:
        root = cfg["text_config"]
    keys = path.split(".")
    for k in keys[:-1]:
        root = root.setdefault(k, {})
    root[keys[-1]] = value


def file_hashes(out_dir: str) -> dict:
    res = {}
    for fn in sorted(os.listdir(out_dir)):
        with open(os.path.join(out_dir, fn), "rb") as f:
            res[fn] = hashlib.sha256(f.read()).hexdigest()
    return res


def generate(out_dir: str, preset: str | None = None, config: dict | None = None, weights: str = "bf16",
             seed: int = 0, sets=()):
    if preset:
        p = get_preset(preset)
    else:
        p = {"config": config, "fmt_of": WEIGHT_SCHEMES[weights]}
    cfg_json = p["config"]
    for path, value in sets:
        _set(cfg_json, path, value)
    cfg = parse_config(cfg_json)
    write_checkpoint(out_dir, cfg_json, cfg, random_value_of(seed), p["fmt_of"],
                     share_w13_scale2=p.get("share_w13_scale2", True), scale2_shape=p.get("scale2_shape", ()),
                     input_scale=p.get("input_scale"), alt_bias_name=p.get("alt_bias_name", False),
                     extra_tensors=p.get("extra_tensors", ()), shard_bytes=p.get("shard_bytes", 4 << 20),
                     generation_config=GENERATION_CONFIG)
    return file_hashes(out_dir)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", choices=sorted(PRESETS))
    ap.add_argument("--config", help="a config.json to use instead of a preset")
    ap.add_argument("--weights", choices=sorted(WEIGHT_SCHEMES), default="bf16",
                    help="linear weight formats with --config (default bf16)")
    ap.add_argument("--out")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--set", action="append", default=[], metavar="KEY=JSON",
                    help="override a text-config field (dotted path; leading '/' = top level)")
    ap.add_argument("--list", action="store_true", help="list the presets")
    a = ap.parse_args()
    if a.list:
        for name in sorted(PRESETS):
            print(f"{name}: {' '.join((PRESETS[name].__doc__ or '').split())}")
        return
    if not a.out or bool(a.preset) == bool(a.config):
        ap.error("give --out and exactly one of --preset / --config")
    sets = []
    for s in a.set:
        k, _, v = s.partition("=")
        try:
            sets.append((k, json.loads(v)))
        except json.JSONDecodeError:
            sets.append((k, v))
    config = None
    if a.config:
        with open(a.config) as f:
            config = json.load(f)
    hashes = generate(a.out, a.preset, config, a.weights, a.seed, sets)
    print(json.dumps(hashes, indent=2))


if __name__ == "__main__":
    main()
