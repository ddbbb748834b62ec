"""Model-level properties: dense == MSA when top-k covers every block, decode == prefill, batching, the training
forward == the inference step, taps, building blocks against their formulas."""
import math

import pytest
import torch

from helpers import rel_err, small_config, small_model
from msaref import model as M
from msaref.formats import nvfp4_quantize_kv, pack_nibbles
from msaref.model import Runtime
from msaref.runner import run


def prompt(n, vocab=97, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(3, vocab, (n,), generator=g).tolist()


@pytest.fixture(scope="module")
def model32():
    return small_model()[0]


@pytest.fixture(scope="module")
def model64():
    return small_model(dtype=torch.float64)[0]


@pytest.mark.parametrize("mode", ["exact", "q8kv4"])
@pytest.mark.parametrize("kv", ["nvfp4", "bf16"])
def test_msa_equals_dense_when_topk_covers_all_blocks(model32, mode, kv):
    toks = prompt(170)  # 11 blocks of 16
    outs = []
    for rt in (Runtime(mode=mode, kv_dtype=kv, topk_blocks=11), Runtime(mode=mode, kv_dtype=kv, force_dense=True)):
        st = model32.new_sequence(rt)
        outs.append(model32.step([st], [toks], rt).logits[0])
    assert torch.equal(outs[0], outs[1])
    # and with the configured top-3 the result really differs (sparsity is active)
    rt = Runtime(mode=mode, kv_dtype=kv)
    st = model32.new_sequence(rt)
    sparse = model32.step([st], [toks], rt).logits[0]
    assert not torch.equal(sparse[-1], outs[1][-1])
    assert torch.equal(sparse[:48], outs[1][:48])  # within the first top-3 blocks everything is selected


@pytest.mark.parametrize("kv", ["nvfp4", "fp8", "bf16"])
def test_decode_step_by_step_equals_prefill(model64, model32, kv):
    toks = prompt(120, seed=1)
    for model, tol in ((model64, 1e-10), (model32, 1e-4)):  # float32: KV rounding flips
        rt = Runtime(kv_dtype=kv)
        a = model.new_sequence(rt)
        full = model.step([a], [toks], rt, record_layers=(1, 2))
        b = model.new_sequence(rt)
        pieces, sels, i = [], {1: [], 2: []}, 0
        for n in [40] + [1] * 10 + [8, 3, 5, 8, 1, 2, 7, 8] + [1] * 100:  # prefill chunk, decode 1..8 at a time
            if i >= len(toks):
                break
            r = model.step([b], [toks[i:i + n]], rt, record_layers=(1, 2))
            pieces.append(r.logits[0])
            for li in (1, 2):
                sels[li].append(r.selections[li][0]["sel"])
            i += n
        step = torch.cat(pieces)
        assert rel_err(step, full.logits[0]) < tol, model.dtype
        for li in (1, 2):
            assert torch.equal(torch.cat(sels[li]), full.selections[li][0]["sel"])


def test_batch_of_sequences_equals_each_alone(model32):
    rt = Runtime()
    ps = [prompt(90, seed=2), prompt(30, seed=3), prompt(150, seed=4)]
    states = [model32.new_sequence(rt) for _ in ps]
    together = model32.step(states, ps, rt)
    for i, p in enumerate(ps):
        st = model32.new_sequence(rt)
        alone = model32.step([st], [p], rt).logits[0]
        assert rel_err(together.logits[i], alone) < 1e-5
    # a mixed decode step (different lengths, 1..8 new tokens each)
    nxt = [[5], [6, 7, 8], [9, 10, 11, 12, 13, 14, 15, 16]]
    r = model32.step(states, nxt, rt)
    for i, p in enumerate(ps):
        st = model32.new_sequence(rt)
        alone = model32.step([st], [p + nxt[i]], rt).logits[0][-len(nxt[i]):]
        assert rel_err(r.logits[i], alone) < 1e-5


@pytest.mark.parametrize("mode", ["exact", "q8kv4"])
def test_training_forward_equals_inference(model32, mode):
    toks = prompt(100, seed=5)
    rt = Runtime(mode=mode)
    st = model32.new_sequence(rt)
    inf = model32.step([st], [toks], rt).logits[0]
    ids = torch.tensor([toks, toks])
    with torch.no_grad():
        tr = model32(ids, rt)
    tol = 1e-5 if mode == "exact" else 5e-3  # q8kv4: E4M3 roundings of Q and P amplify summation-order noise
    assert rel_err(tr[0], inf) < tol and rel_err(tr[1], inf) < tol


def test_training_forward_is_differentiable():
    model, cfg = small_model(w4a4=True)
    model.train()
    model.set_weight_fake_quant(True)
    ids = torch.tensor([prompt(80, seed=6)])
    aux = {}
    logits = model(ids, Runtime(), aux=aux, taps=(1,))
    loss = torch.nn.functional.cross_entropy(logits[0, :-1], ids[0, 1:])
    la = aux["layers"][1]
    kl = (la["index_scores"].float().log_softmax(-1) * 0).sum()  # the trainer builds its KL from these
    (loss + kl).backward()
    q = model.model.layers[1].self_attn.q_proj.weight.grad
    e = model.model.layers[1].block_sparse_moe.experts[0].w1.weight.grad
    assert q is not None and torch.isfinite(q).all() and q.abs().sum() > 0
    assert e is not None and torch.isfinite(e).all()
    assert la["sel"].shape == (1, 80, cfg.num_kv_heads, cfg.topk_blocks)
    assert la["probs"].shape[-1] == 80 and aux["taps"][1].shape == (1, 80, cfg.hidden_size)


def test_taps_are_the_residual_stream(model32):
    rt = Runtime()
    st = model32.new_sequence(rt)
    r = model32.step([st], [prompt(40, seed=7)], rt, taps=(0, 3))
    last = r.taps[3][0]
    assert torch.equal(model32._lm_head(last), r.logits[0])
    assert r.taps[0][0].shape == (40, 64) and not torch.equal(r.taps[0][0], last)


def test_selection_recording_and_runner(model32):
    ps = [prompt(100, seed=8), prompt(60, seed=9)]
    res = run(model32, ps, Runtime(), n_greedy=5, record_layers=(1, 2))
    sel, bs = res.selections[(1, 0, 99)]
    assert sel.shape == (2, 3) and sel[:, -1].eq(99 // 16).all()
    assert bs.shape[0] == 2
    assert [len(g) for g in res.greedy] == [5, 5] and all(m >= 0 for ms in res.margins for m in ms)
    # greedy tokens are the argmax of the logits at the previous position
    assert res.greedy[0][1] == int(torch.argmax(res.logits[(0, 100)]))


def test_w4a4_and_q8kv4_change_outputs_moderately():
    base, _ = small_model()
    w4, _ = small_model(w4a4=True)
    toks = prompt(100, seed=10)
    outs = {}
    for name, m, mode in (("base", base, "exact"), ("w4a4", w4, "exact"), ("q8", base, "q8kv4")):
        rt = Runtime(mode=mode)
        outs[name] = m.step([m.new_sequence(rt)], [toks], rt).logits[0]
    for name in ("w4a4", "q8"):
        rows = torch.tensor([rel_err(a, b) for a, b in zip(outs[name], outs["base"])])
        # NVFP4 activations carry ~10% noise per element (4-bit values): expect a visible but bounded change
        assert rows.max() > 1e-3 and rows.median() < 0.3, (name, rows.median(), rows.max())


def test_kv_cache_stores_nvfp4_codes_and_page_layout(model32):
    rt = Runtime(kv_dtype="nvfp4")
    st = model32.new_sequence(rt)
    model32.step([st], [prompt(20, seed=11)], rt)
    kv = st.layers[1]
    assert len(kv) == 20
    k_exact, _, ik = kv.read("exact")
    q = nvfp4_quantize_kv(k_exact)  # requantising stored values reproduces the stored codes
    assert torch.equal(q.codes, kv.k.raw["codes"][:20]) and torch.equal(q.scale_codes, kv.k.raw["scales"][:20])
    pages = kv.nvfp4_page_bytes("k", block=16)
    assert len(pages) == 2 and pages[0][0].shape == (2, 16, 16) and pages[0][1].shape == (2, 16, 2)
    assert torch.equal(pages[1][0][:, :4], pack_nibbles(kv.k.raw["codes"][16:20]).permute(1, 0, 2))
    assert pages[1][0][:, 4:].eq(0).all()
    assert kv.read("q8kv4")[0].abs().max() <= 448 and ik.shape == (20, 32)


# ------------------------------------------------------------------------------------------------ building blocks
def test_gemma_norm_and_swigluoai():
    n = M.GemmaRMSNorm(4, 1e-6)
    n.weight.data = torch.tensor([0.0, 0.5, -0.5, 1.0])
    x = torch.tensor([[1.0, 2.0, 3.0, 4.0]], dtype=torch.float64)
    n = n.double()
    r = 1 / math.sqrt((1 + 4 + 9 + 16) / 4 + 1e-6)
    assert torch.allclose(n(x), torch.tensor([[1 * r, 2 * r * 1.5, 3 * r * 0.5, 4 * r * 2]], dtype=torch.float64))
    g = torch.tensor([-10.0, 0.0, 2.0, 9.0], dtype=torch.float64)
    u = torch.tensor([-9.0, 1.0, 3.0, 8.0], dtype=torch.float64)
    want = [min(a, 7) / (1 + math.exp(-1.702 * min(a, 7))) * (max(-7, min(b, 7)) + 1) for a, b in zip(g.tolist(),
                                                                                                    u.tolist())]
    assert torch.allclose(M.swigluoai(g, u, 1.702, 7.0), torch.tensor(want, dtype=torch.float64))


def test_partial_neox_rope():
    rope = M.Rotary(8, 5e6)
    assert rope.inv_freq.tolist() == [5e6 ** (-(2.0 * i) / 8) for i in range(4)]
    x = torch.randn(3, 2, 16, dtype=torch.float64)
    pos = torch.tensor([0, 7, 1000000])
    c, s = rope.cos_sin(pos, torch.float32)
    ang = 1000000 * rope.inv_freq
    assert torch.equal(c[2], torch.cos(ang).float()) and c.dtype == torch.float32
    y = rope.apply(x, c.double(), s.double())
    assert torch.equal(y[..., 8:], x[..., 8:]) and torch.equal(y[0], x[0])
    i = 1  # pair (1, 5)
    a = 7 * rope.inv_freq[i]
    want1 = x[1, :, i] * math.cos(a) - x[1, :, i + 4] * math.sin(a)
    want2 = x[1, :, i + 4] * math.cos(a) + x[1, :, i] * math.sin(a)
    assert torch.allclose(y[1, :, i], want1, atol=1e-6) and torch.allclose(y[1, :, i + 4], want2, atol=1e-6)


def test_moe_routing_rule():
    model, cfg = small_model()
    moe = model.model.layers[1].block_sparse_moe
    moe.gate.weight.data.zero_()
    moe.e_score_correction_bias.data = torch.tensor([0.1, 0.3, 0.3, 0.0])  # experts 1 and 2 tie
    ids, w = moe.route(torch.randn(2, cfg.hidden_size))
    assert ids.tolist() == [[1, 2], [1, 2]]
    # all sigmoid scores are 0.5 -> renormalised 0.5 each, times routed_scaling_factor 2.0
    assert torch.allclose(w, torch.full((2, 2), 1.0))
    moe.gate.weight.data = torch.randn(cfg.num_experts, cfg.hidden_size)
    x = torch.randn(5, cfg.hidden_size)
    ids, w = moe.route(x)
    s = torch.sigmoid(x @ moe.gate.weight.t())
    assert torch.allclose(w.sum(-1), torch.full((5,), 2.0))
    assert torch.allclose(w, s.gather(-1, ids) / s.gather(-1, ids).sum(-1, keepdim=True) * 2.0)
    y = moe(x, Runtime())
    want = sum(w[:, r:r + 1] * torch.stack([moe.experts[int(e)](x[i:i + 1], Runtime())[0]
                                            for i, e in enumerate(ids[:, r])]) for r in range(2))
    want = want + moe.shared_experts(x, Runtime())
    assert torch.allclose(y, want, atol=1e-5)


def test_config_errors():
    from msaref.config import ConfigError, parse_config
    base = small_config()
    for path, value in (("sparse_init_block", 1), ("sparse_local_block", 2), ("sparse_index_dim", 64)):
        cfg = small_config()
        cfg["text_config"]["sparse_attention_config"][path] = value
        with pytest.raises(ConfigError):
            parse_config(cfg)
    for key in ("swiglu_limit", "rotary_dim", "moe_layer_freq", "routed_scaling_factor"):
        cfg = small_config()
        del cfg["text_config"][key]
        if key == "rotary_dim":
            del cfg["text_config"]["partial_rotary_factor"]
        with pytest.raises(ConfigError, match=key):
            parse_config(cfg)
    cfg = small_config()
    cfg["text_config"]["partial_rotary_factor"] = 0.25
    with pytest.raises(ConfigError):
        parse_config(cfg)
    cfg = small_config()
    cfg["text_config"]["sparse_attention_config"]["use_sparse_attention"] = False
    assert not any(parse_config(cfg).msa_layers)
    assert parse_config(base).kv_cache_quant_algo == "nvfp4"


def test_score_matches_one_prefill(model32):
    from msaref.runner import score
    toks = prompt(70, seed=12)
    rt = Runtime()
    lps = score(model32, toks, rt, chunk=16)  # chunked prefill through the cache
    lg = model32.step([model32.new_sequence(rt)], [toks], rt).logits[0].double().log_softmax(-1)
    want = [float(lg[i, toks[i + 1]]) for i in range(len(toks) - 1)]
    assert max(abs(a - b) for a, b in zip(lps, want)) < 1e-4
