"""The committed goldens (tests/reference/goldens) are well-formed and still what the reference computes: every
run's cheap rows (positions < 300) are recomputed in float64 from a fresh checkpoint and compared."""
import json
import os

import numpy as np
import pytest
import torch

from gen_checkpoint import generate
from msaref.checkpoint import load_model
from msaref.model import Runtime

GOLDENS = os.path.join(os.path.dirname(__file__), "..", "..", "..", "tests", "reference", "goldens")
PRESETS = sorted(p for p in (os.listdir(GOLDENS) if os.path.isdir(GOLDENS) else [])
                 if os.path.exists(os.path.join(GOLDENS, p, "manifest.json")))


@pytest.fixture(scope="module", params=PRESETS)
def golden(request, tmp_path_factory):
    preset = request.param
    d = str(tmp_path_factory.mktemp(preset))
    hashes = generate(d, preset)
    man = json.load(open(os.path.join(GOLDENS, preset, "manifest.json")))
    assert hashes == man["checkpoint_sha256"]
    model, cfg = load_model(d, dtype=torch.float64)
    return preset, man, model, cfg


def load_run(preset, name):
    base = os.path.join(GOLDENS, preset, name)
    meta = json.load(open(os.path.join(base, "run.json")))
    lg = np.fromfile(os.path.join(base, meta["logits"]["file"]), dtype="<f4").reshape(meta["logits"]["shape"])
    sc = np.fromfile(os.path.join(base, meta["selections"]["scores_file"]), dtype="<f4")
    return meta, lg, sc


def test_goldens_are_well_formed(golden):
    preset, man, model, cfg = golden
    assert man["format_version"] == 1 and len(man["runs"]) >= 6
    assert max(len(p) for p in man["prompts"]) > 16 * man["block_size"]  # sparsity really exercised
    for name in man["runs"]:
        meta, lg, sc = load_run(preset, name)
        assert lg.shape == (len(meta["logits"]["rows"]), cfg.vocab_size) and np.isfinite(lg).all()
        assert {r["phase"] for r in meta["logits"]["rows"]} == {"prefill", "decode"}
        for r in meta["selections"]["rows"]:
            valid = [b for b in r["sel"] if b >= 0]
            local = r["pos"] // man["block_size"]
            assert valid[-1] == local and len(valid) == min(man["topk_blocks"], local + 1)
            assert r["scores_offset"] + r["n_hist"] <= len(sc)
        lp = np.fromfile(os.path.join(GOLDENS, preset, name, meta["logprobs"]["file"]), dtype="<f4")
        assert lp.shape == (sum(len(p) - 1 for p in man["prompts"]),) and (lp <= 0).all()
        off = 0
        for n, ppl in zip(meta["logprobs"]["counts"], meta["logprobs"]["perplexity"]):
            assert abs(np.exp(-lp[off:off + n].astype(np.float64).mean()) / ppl - 1) < 1e-5
            off += n
        g = meta["greedy"]
        assert all(len(t) == man["n_greedy"] for t in g["tokens"]) and len(g["tokens"]) == len(man["prompts"])
        assert len({tuple(t) for t in g["tokens"]}) == len(g["tokens"])  # distinct continuations


def test_goldens_match_the_reference(golden):
    preset, man, model, cfg = golden
    checked = 0
    for name in man["runs"]:
        meta, lg, sc = load_run(preset, name)
        rt = Runtime(mode=meta["mode"], kv_dtype=meta["kv_dtype"], topk_method=meta["topk_method"])
        sel_rows = meta["selections"]["rows"]
        for i, row in enumerate(meta["logits"]["rows"]):
            if row["phase"] != "prefill" or row["pos"] >= 300:
                continue
            toks = man["prompts"][row["seq"]][:row["pos"] + 1]
            st = model.new_sequence(rt)
            r = model.step([st], [toks], rt, record_layers=man["msa_layers"])
            got = r.logits[0][-1]
            want = torch.from_numpy(lg[i]).double()
            assert float((got - want).abs().max() / want.abs().max()) < 1e-6, (name, row)
            if row["pos"] + 1 < len(man["prompts"][row["seq"]]):  # the log-probability file agrees
                lps = np.fromfile(os.path.join(GOLDENS, preset, name, meta["logprobs"]["file"]), dtype="<f4")
                off = sum(meta["logprobs"]["counts"][:row["seq"]]) + row["pos"]
                nxt = man["prompts"][row["seq"]][row["pos"] + 1]
                assert abs(float(torch.log_softmax(got, -1)[nxt]) - float(lps[off])) < 1e-5
            for s in sel_rows:
                if s["seq"] == row["seq"] and s["pos"] == row["pos"]:
                    assert r.selections[s["layer"]][0]["sel"][-1, s["group"]].tolist() == s["sel"]
            checked += 1
    assert checked > 0
