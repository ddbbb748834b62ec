"""The training model (tools/train/model.py) against the independent reference (tools/reference/msaref) through the
exported checkpoint: export a small random model, load it with the reference, and compare logits of a sequence long
enough for sparse attention (NVFP4 KV, W4A4 NVFP4 experts, MSA top-2 of 128-token blocks). Also checks the export
round trip (read-back weights equal the NVFP4/BF16 values) and the drafter's checkpoint."""
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "reference"))

from drafter import DrafterConfig, DSparkDrafter  # noqa: E402
from export import export_drafter, export_model, read_drafter_state, read_model_state  # noqa: E402
from model import Mode, TinyConfig, TinyM3, quantize_experts_  # noqa: E402
from msaref.checkpoint import load_model  # noqa: E402
from msaref.model import Runtime  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
TOKENIZER_DIR = os.path.join(ROOT, "models", "default")


def small_model(seed=3):
    cfg = TinyConfig(vocab_size=4096, hidden_size=64, num_layers=3, num_heads=2, num_kv_heads=1,
                     dense_intermediate_size=64, intermediate_size=32, shared_intermediate_size=32, num_experts=4,
                     topk_blocks=2)
    m = TinyM3(cfg)
    m.init_weights(seed)
    with torch.no_grad():  # larger than the training init so that every path (routing, selection) matters
        for name, p in m.named_parameters():
            if p.dim() == 2:
                p.mul_(5.0)
            elif "correction_bias" in name:
                p.copy_(torch.randn(p.shape, generator=torch.Generator().manual_seed(seed)) * 0.05)
    return cfg, m


def test_training_model_matches_reference(tmp_path):
    cfg, m = small_model()
    quantize_experts_(m)
    out = str(tmp_path / "model")
    export_model(m.state_dict(), cfg, out, 4089, 4091, TOKENIZER_DIR)
    back = read_model_state(out)
    # export round trip: experts were NVFP4 values already (exact), the rest is BF16-rounded
    sd = m.state_dict()
    for k, v in back.items():
        want = sd[k].float()
        if ".experts." not in k and "block_sparse_moe.gate" not in k and "correction_bias" not in k:
            want = want.to(torch.bfloat16).float()
        assert torch.equal(v, want), k
    m.load_state_dict(back)
    m.eval()
    ref, _ = load_model(out)
    # Different summation orders (batched vs per-sequence GEMMs) give ~3e-7 differences; now and then one of them
    # flips a discontinuous step (an E2M1 rounding of a W4A4 activation or of a KV value, an expert choice) and that
    # position differs more, and through attention so do later positions, at ~1e-4. How early and how often depends
    # on the CPU's kernels: on an AVX-512 EPYC (Zen 4) with one thread, 4 of 10 sequences of 700 tokens had a flip,
    # one of them at position 183 (62% of its positions above 1e-4, median 3e-4); CI's machine flipped sequence 5 early
    # enough to fail a single-sequence test. A flip is an accident of one sequence; a wrong formula shows in every
    # one. So: every sequence within a loose bound (median position 1e-2), and the best of eight at the
    # summation-order level (median under 1e-5, 90% of positions within 1e-4, mean under 2e-3).
    sparse_errs, dense_errs = [], []
    for seed in range(5, 13):
        ids = torch.randint(0, 4089, (1, 700), generator=torch.Generator().manual_seed(seed))
        with torch.no_grad():
            ours = m.logits(m(ids, Mode(sparse=True, kv="nvfp4", w4a4=True, w4a4_weights=False)))[0]
            rt = Runtime(mode="exact", kv_dtype="nvfp4", topk_method="float")
            theirs = ref.step([ref.new_sequence(rt)], [ids[0].tolist()], rt).logits[0]
            dense_ours = m.logits(m(ids, Mode(sparse=False, kv="nvfp4", w4a4=True, w4a4_weights=False)))[0]
            rtd = Runtime(mode="exact", kv_dtype="nvfp4", force_dense=True)
            dense_theirs = ref.step([ref.new_sequence(rtd)], [ids[0].tolist()], rtd).logits[0]
        sparse_errs.append((ours - theirs).abs().amax(-1) / theirs.abs().max())
        dense_errs.append((dense_ours - dense_theirs).abs().amax(-1) / dense_theirs.abs().max())
    for errs in (sparse_errs, dense_errs):
        for err in errs:
            assert float(err.median()) < 1e-2, err
        best = min(errs, key=lambda e: float((e > 1e-4).float().mean()))
        assert float(best.median()) < 1e-5, best
        assert float((best > 1e-4).float().mean()) < 0.10, best
        assert float(best.mean()) < 2e-3, best
    # the sparse path really differs from dense at this length
    assert (ours - dense_ours).abs().max() > 1e-3


def test_drafter_checkpoint_round_trip(tmp_path):
    dc = DrafterConfig(vocab_size=4096, hidden_size=64, num_heads=2, num_kv_heads=1, intermediate_size=64,
                       target_layer_ids=[0, 1, 2], markov_rank=8)
    d = DSparkDrafter(dc)
    d.init_weights(1)
    export_drafter(d.state_dict(), dc, str(tmp_path / "drafter"))
    back = read_drafter_state(str(tmp_path / "drafter"))
    sd = d.state_dict()
    assert set(back) == set(sd)
    for k in sd:
        assert torch.equal(back[k], sd[k].float().to(torch.bfloat16).float()), k
