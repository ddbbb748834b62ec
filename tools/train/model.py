"""Training-speed PyTorch implementation of the MiniMax-M3.1 text model (model.md sections 1-2 and 7, msa.md) for the
default model, plus the fake quantisers of its quantisation-aware training.

Parameter names are the checkpoint's text-only names (`model.layers.N.self_attn.q_proj.weight`, `lm_head.weight`,
...), so `state_dict()` is the checkpoint. The math is the reference model's (tools/reference); this file differs in
how it computes for speed: whole-sequence training forward, SDPA attention with a per-query block mask, float top-k
(the engine's keyed top-k differs only on near-ties, msa.md section 3), and the MSA indexer's sparse KL objective
(background msa.md section 1.8). tools/train/tests/test_model.py checks it against the reference.

Runs on torch 1.13 (CPU, manual attention) and torch 2.x (CUDA, SDPA).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reference"))
from msaref.formats import (nvfp4_weight_global_scale, nvfp4_weight_quantize, ste, w4a4_fc1_input,  # noqa: E402
                            w4a4_fc2_input)
from msaref.kv_cache import kv_fake_quant as ref_kv_fake_quant  # noqa: E402
from msaref.model import swigluoai  # noqa: E402,F401  (also used by drafter.py through MLP)

# ----------------------------------------------------------------------------------------------------------------
# Fake quantisers: the reference's quantisers (tools/reference/msaref, formats.md section 3, model.md section 4) with
# straight-through gradients (forward value = quantise-dequantise, gradient = identity)
# ----------------------------------------------------------------------------------------------------------------
def kv_fake_quant(x: torch.Tensor, kv: str | None) -> torch.Tensor:
    """K/V/index-K as the cache stores them ("nvfp4" | "fp8" | "bf16"; None = unquantised), in float32."""
    return ref_kv_fake_quant(x.float(), kv)


def nvfp4_weight_quant(ws: list) -> list:
    """ModelOpt NVFP4 weights dequantised, with one weight_scale_2 shared by the list (M3.1 shares it between w1
    and w3, as the exporter writes them)."""
    amax = max(float(w.detach().abs().max()) for w in ws)
    s2 = nvfp4_weight_global_scale(amax)
    return [nvfp4_weight_quantize(w.detach().float(), s2).dequant(torch.float32) for w in ws]


def w4a4_fc1(x: torch.Tensor):
    """model.md section 4, FC1 input: NVFP4 of x * (2688 / row_amax). Returns (quantised x*S with a straight-through
    gradient, the factor row_amax / 2688 that multiplies the GEMM outputs)."""
    x = x.float()
    xq, f1 = w4a4_fc1_input(x.detach())
    return ste(x / f1.clamp(min=1e-30), xq), f1


def w4a4_fc2(h: torch.Tensor):
    h = h.float()
    hq, f2 = w4a4_fc2_input(h.detach())
    return ste(h * 16.0, hq), f2


@dataclass
class TinyConfig:
    vocab_size: int = 4096
    hidden_size: int = 256
    num_layers: int = 5
    num_heads: int = 4
    num_kv_heads: int = 2
    head_dim: int = 128
    rotary_dim: int = 64
    rope_theta: float = 5_000_000.0
    rms_norm_eps: float = 1e-6
    dense_intermediate_size: int = 512
    intermediate_size: int = 192
    shared_intermediate_size: int = 192
    num_experts: int = 8
    top_k_experts: int = 2
    routed_scaling_factor: float = 2.0
    swiglu_alpha: float = 1.702
    swiglu_limit: float = 7.0
    dense_layers: int = 1          # layers 0..dense_layers-1: dense attention + dense MLP; the rest MSA + MoE
    topk_blocks: int = 4
    block_size: int = 128
    max_position_embeddings: int = 8192

    @property
    def msa_layers(self):
        return [i >= self.dense_layers for i in range(self.num_layers)]

    @property
    def moe_layers(self):
        return [i >= self.dense_layers for i in range(self.num_layers)]


@dataclass
class Mode:
    """How a forward runs. sparse: MSA layers attend to their top-k blocks (else every layer is dense);
    kv: fake-quantise K/V/index-K ("nvfp4" | "fp8" | "bf16" | None); w4a4: NVFP4 experts (weights and activations,
    model.md section 4); topk: override of topk_blocks; kl_rows: query rows per sequence for the indexer's KL loss
    (0 = no KL)."""
    sparse: bool = True
    kv: str | None = None
    w4a4: bool = False
    topk: int | None = None
    kl_rows: int = 0
    w4a4_weights: bool = True  # False: expert weights are NVFP4 values already (read from a checkpoint)


class GemmaRMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(dim))
        self.eps = eps

    def forward(self, x):
        xf = x.float()
        return xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps) * (1.0 + self.weight.float())


def linear(i, o):
    return nn.Linear(i, o, bias=False)


class MLP(nn.Module):
    def __init__(self, hid, inter, cfg):
        super().__init__()
        self.gate_proj, self.up_proj, self.down_proj = linear(hid, inter), linear(hid, inter), linear(inter, hid)
        self.cfg = cfg

    def forward(self, x):
        return self.down_proj(swigluoai(self.gate_proj(x), self.up_proj(x), self.cfg.swiglu_alpha,
                                        self.cfg.swiglu_limit))


class Expert(nn.Module):
    def __init__(self, hid, inter):
        super().__init__()
        self.w1, self.w3, self.w2 = linear(hid, inter), linear(hid, inter), linear(inter, hid)


class Router(nn.Module):
    def __init__(self, hid, n):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(n, hid))


class MoE(nn.Module):
    def __init__(self, cfg: TinyConfig):
        super().__init__()
        self.cfg = cfg
        self.gate = Router(cfg.hidden_size, cfg.num_experts)
        self.e_score_correction_bias = nn.Parameter(torch.zeros(cfg.num_experts), requires_grad=False)
        self.experts = nn.ModuleList(Expert(cfg.hidden_size, cfg.intermediate_size) for _ in range(cfg.num_experts))
        self.shared_experts = MLP(cfg.hidden_size, cfg.shared_intermediate_size, cfg)
        self.last_load = None

    def forward(self, x, mode: Mode):
        c = self.cfg
        s = torch.sigmoid(F.linear(x.float(), self.gate.weight.float()))
        ids = torch.topk((s + self.e_score_correction_bias).detach(), c.top_k_experts, dim=-1).indices
        w = s.gather(-1, ids)
        w = w / w.sum(-1, keepdim=True) * c.routed_scaling_factor
        self.last_load = torch.bincount(ids.reshape(-1), minlength=c.num_experts).detach()
        flat = ids.reshape(-1)
        order = torch.argsort(flat)
        rows = order // c.top_k_experts
        counts = self.last_load.tolist()
        out = torch.zeros(x.shape[0], x.shape[1], dtype=torch.float32, device=x.device)
        start = 0
        for e, n in enumerate(counts):
            if n == 0:
                continue
            sel = order[start:start + n]
            r = rows[start:start + n]
            start += n
            y = self.expert(e, x[r], mode)
            out.index_add_(0, r, (y.float() * w.reshape(-1)[sel].unsqueeze(1)))
        return out + self.shared_experts(x).float()

    def expert(self, e, x, mode: Mode):
        ex = self.experts[e]
        c = self.cfg
        if not mode.w4a4:
            return ex.w2(swigluoai(ex.w1(x), ex.w3(x), c.swiglu_alpha, c.swiglu_limit))
        if mode.w4a4_weights:
            q1, q3 = nvfp4_weight_quant([ex.w1.weight, ex.w3.weight])
            (q2,) = nvfp4_weight_quant([ex.w2.weight])
            w1, w3, w2 = (ste(m.weight, q.to(m.weight.dtype)) for m, q in ((ex.w1, q1), (ex.w3, q3), (ex.w2, q2)))
        else:
            w1, w3, w2 = ex.w1.weight, ex.w3.weight, ex.w2.weight
        xq, f1 = w4a4_fc1(x)
        h = swigluoai(F.linear(xq, w1) * f1, F.linear(xq, w3) * f1, c.swiglu_alpha, c.swiglu_limit)
        hq, f2 = w4a4_fc2(h)
        return F.linear(hq, w2) * f2


class Rotary:
    def __init__(self, rotary_dim, theta):
        self.rotary_dim = rotary_dim
        half = rotary_dim // 2
        self.inv_freq = torch.tensor([theta ** (-(2.0 * i) / rotary_dim) for i in range(half)], dtype=torch.float64)

    def cos_sin(self, T, device):
        ang = torch.arange(T, dtype=torch.float64).unsqueeze(-1) * self.inv_freq
        return torch.cos(ang).float().to(device), torch.sin(ang).float().to(device)

    def apply(self, x, cos, sin):
        """x [B, T, H, D] float32; cos/sin [T, rotary/2]."""
        h = self.rotary_dim // 2
        c, s = cos[None, :, None, :], sin[None, :, None, :]
        x1, x2, rest = x[..., :h], x[..., h:2 * h], x[..., 2 * h:]
        return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s, rest], dim=-1)


def block_select_mask(iq, ik, topk, block):
    """Index branch selection, no gradient. iq [B, T, G, Di], ik [B, T, Di] -> token mask [B, G, T, T] (key j in
    one of the query's top-k blocks and j <= t). The local block is always selected; ranking by the block maxima of
    iq . ik over the visible keys (msa.md sections 2-3)."""
    B, T, G, _ = iq.shape
    NB = (T + block - 1) // block
    pos = torch.arange(T, device=iq.device)
    causal = pos[None, :] <= pos[:, None]  # [t, j]
    with torch.no_grad():
        sc = torch.einsum("btgd,bjd->bgtj", iq.float(), ik.float())
        sc = sc.masked_fill(~causal, -math.inf)
        if NB * block > T:
            sc = F.pad(sc, (0, NB * block - T), value=-math.inf)
        bs = sc.reshape(B, G, T, NB, block).amax(-1)  # [B, G, T, NB]
        local = pos // block
        bs = bs.masked_fill(torch.arange(NB, device=iq.device)[None, :] == local[:, None], math.inf)
        k = min(topk, NB)
        idx = torch.topk(bs, k, dim=-1).indices
        bm = torch.zeros(B, G, T, NB, dtype=torch.bool, device=iq.device).scatter_(-1, idx, True)
        bm &= torch.arange(NB, device=iq.device)[None, :] <= local[:, None]
        return bm[..., pos // block] & causal


def attention(q, k, v, mask, use_sdpa):
    """q [B, T, H, D], k/v [B, T, Hkv, D], mask [B, G, T, T] bool or None (= causal). Returns [B, T, H, D]."""
    B, T, H, D = q.shape
    gqa = H // k.shape[2]
    qh = q.transpose(1, 2)
    kh = k.repeat_interleave(gqa, dim=2).transpose(1, 2)
    vh = v.repeat_interleave(gqa, dim=2).transpose(1, 2)
    if use_sdpa:
        if mask is None:
            o = F.scaled_dot_product_attention(qh, kh, vh, is_causal=True)
        else:
            o = F.scaled_dot_product_attention(qh, kh, vh, attn_mask=mask.repeat_interleave(gqa, dim=1))
    else:
        if mask is None:
            pos = torch.arange(T, device=q.device)
            m = (pos[None, :] <= pos[:, None])[None, None]
        else:
            m = mask.repeat_interleave(gqa, dim=1)
        lg = torch.matmul(qh.float(), kh.float().transpose(-1, -2)) / math.sqrt(D)
        o = torch.matmul(torch.softmax(lg.masked_fill(~m, -math.inf), -1), vh.float()).to(q.dtype)
    return o.transpose(1, 2)


def indexer_kl(q, k, iq, ik, mask, rows):
    """Sparse KL objective of the MSA indexer (background msa.md 1.8) on query rows `rows`: teacher = the main
    attention distribution over the selected visible tokens, per head, averaged over the group's heads (no
    gradient); student = softmax of iq . ik / sqrt(Di) over the same tokens. Returns the mean KL over
    (batch, group, row). q [B,T,H,D], k [B,T,Hkv,D], iq [B,T,G,Di], ik [B,T,Di], mask [B,G,T,T] or None (causal)."""
    B, T, H, D = q.shape
    G = k.shape[2]
    gqa = H // G
    pos = torch.arange(T, device=q.device)
    if mask is None:
        m = (pos[None, :] <= pos[rows][:, None])[None, None].expand(B, G, len(rows), T)
    else:
        m = mask[:, :, rows]
    with torch.no_grad():
        qr = q[:, rows].float().reshape(B, len(rows), G, gqa, D)
        lg = torch.einsum("brgqd,bjgd->bgqrj", qr, k.float()) / math.sqrt(D)
        p = torch.softmax(lg.masked_fill(~m[:, :, None], -math.inf), -1).mean(2)  # [B, G, R, T]
    s = torch.einsum("brgd,bjd->bgrj", iq[:, rows].float(), ik.float()) / math.sqrt(iq.shape[-1])
    logq = torch.log_softmax(s.masked_fill(~m, -math.inf), -1)
    kl = torch.where(p > 0, p * (torch.log(p.clamp(min=1e-30)) - logq), torch.zeros_like(p)).sum(-1)
    return kl.mean()


class SelfAttention(nn.Module):
    def __init__(self, cfg: TinyConfig, msa: bool):
        super().__init__()
        H, Hkv, D, hid = cfg.num_heads, cfg.num_kv_heads, cfg.head_dim, cfg.hidden_size
        self.q_proj, self.k_proj = linear(hid, H * D), linear(hid, Hkv * D)
        self.v_proj, self.o_proj = linear(hid, Hkv * D), linear(H * D, hid)
        self.q_norm, self.k_norm = GemmaRMSNorm(D, cfg.rms_norm_eps), GemmaRMSNorm(D, cfg.rms_norm_eps)
        self.msa = msa
        if msa:
            self.index_q_proj = linear(hid, Hkv * D)
            self.index_k_proj = linear(hid, D)
            self.index_q_norm = GemmaRMSNorm(D, cfg.rms_norm_eps)
            self.index_k_norm = GemmaRMSNorm(D, cfg.rms_norm_eps)
        self.cfg = cfg

    def forward(self, n, cos, sin, rope: Rotary, mode: Mode, rows, use_sdpa, stats):
        c = self.cfg
        B, T, _ = n.shape
        q = rope.apply(self.q_norm(self.q_proj(n).view(B, T, c.num_heads, c.head_dim)), cos, sin)
        k = rope.apply(self.k_norm(self.k_proj(n).view(B, T, c.num_kv_heads, c.head_dim)), cos, sin)
        v = self.v_proj(n).view(B, T, c.num_kv_heads, c.head_dim).float()
        k, v = kv_fake_quant(k, mode.kv), kv_fake_quant(v, mode.kv)
        mask = None
        if self.msa:
            nd = n.detach()  # the index branch sees stopgrad(x): it learns from the KL loss only
            iq = rope.apply(self.index_q_norm(self.index_q_proj(nd).view(B, T, c.num_kv_heads, c.head_dim)),
                            cos, sin)
            ik = rope.apply(self.index_k_norm(self.index_k_proj(nd).view(B, T, 1, c.head_dim)), cos, sin)[:, :, 0]
            ik = kv_fake_quant(ik, mode.kv)
            if mode.sparse:
                mask = block_select_mask(iq, ik, mode.topk or c.topk_blocks, c.block_size)
            if rows is not None:
                stats["kl"].append(indexer_kl(q.detach(), k.detach(), iq, ik, mask, rows))
        o = attention(q, k, v, mask, use_sdpa)  # under CUDA autocast SDPA runs in BF16
        return self.o_proj(o.reshape(B, T, -1))


class DecoderLayer(nn.Module):
    def __init__(self, cfg: TinyConfig, idx: int):
        super().__init__()
        self.input_layernorm = GemmaRMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.post_attention_layernorm = GemmaRMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.self_attn = SelfAttention(cfg, cfg.msa_layers[idx])
        self.is_moe = cfg.moe_layers[idx]
        if self.is_moe:
            self.block_sparse_moe = MoE(cfg)
        else:
            self.mlp = MLP(cfg.hidden_size, cfg.dense_intermediate_size, cfg)


class Inner(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(cfg, i) for i in range(cfg.num_layers))
        self.norm = GemmaRMSNorm(cfg.hidden_size, cfg.rms_norm_eps)


class TinyM3(nn.Module):
    def __init__(self, cfg: TinyConfig):
        super().__init__()
        self.cfg = cfg
        self.model = Inner(cfg)
        self.lm_head = linear(cfg.hidden_size, cfg.vocab_size)
        self.rope = Rotary(cfg.rotary_dim, cfg.rope_theta)
        self.use_sdpa = hasattr(F, "scaled_dot_product_attention")

    def init_weights(self, seed: int):
        g = torch.Generator().manual_seed(seed)
        n_layers = self.cfg.num_layers
        for name, p in self.named_parameters():
            if name.endswith("norm.weight") or "e_score_correction_bias" in name:
                nn.init.zeros_(p)
                continue
            std = 0.02
            if name.endswith(("o_proj.weight", "down_proj.weight", "w2.weight")):
                std = 0.02 / math.sqrt(2 * n_layers)
            with torch.no_grad():
                p.copy_(torch.randn(p.shape, generator=g) * std)

    def forward(self, ids, mode: Mode, taps=(), stats=None):
        """ids [B, T] -> final hidden [B, T, hidden] (before the final norm) and, in `stats`, the indexer KL terms,
        expert loads and the requested taps (residual after each listed layer)."""
        B, T = ids.shape
        stats = stats if stats is not None else {}
        stats.setdefault("kl", [])
        stats["taps"] = {}
        cos, sin = self.rope.cos_sin(T, ids.device)
        rows = None
        if mode.kl_rows:
            g = torch.Generator().manual_seed(int(ids[0, :4].sum()))  # deterministic for a given batch
            rows = torch.sort(torch.randperm(T, generator=g)[:mode.kl_rows]).values.to(ids.device)
        x = self.model.embed_tokens(ids).float()
        for i, layer in enumerate(self.model.layers):
            n = layer.input_layernorm(x)
            x = x + layer.self_attn(n, cos, sin, self.rope, mode, rows, self.use_sdpa, stats).float()
            n = layer.post_attention_layernorm(x)
            if layer.is_moe:
                x = x + layer.block_sparse_moe(n.reshape(B * T, -1), mode).view(B, T, -1)
            else:
                x = x + layer.mlp(n).float()
            if i in taps:
                stats["taps"][i] = x
        return x

    def logits(self, h):
        return self.lm_head(self.model.norm(h))

    def moe_layers(self):
        return [l.block_sparse_moe for l in self.model.layers if l.is_moe]


@torch.no_grad()
def shipped_form_(model: TinyM3):
    """The weights as the checkpoint stores them (export.py): routed experts NVFP4 (below), router weight and bias
    FP32, everything else BF16. Run the result with Mode(w4a4_weights=False)."""
    for name, p in model.named_parameters():
        if ".experts." not in name and ".block_sparse_moe.gate." not in name and "correction_bias" not in name:
            p.copy_(p.to(torch.bfloat16).to(p.dtype))
    quantize_experts_(model)


@torch.no_grad()
def quantize_experts_(model: TinyM3):
    """Replace every routed expert's weights by their NVFP4 values (what the checkpoint stores: w1/w3 share one
    weight_scale_2); run the result with Mode(w4a4_weights=False)."""
    for moe in model.moe_layers():
        for ex in moe.experts:
            q1, q3 = nvfp4_weight_quant([ex.w1.weight, ex.w3.weight])
            (q2,) = nvfp4_weight_quant([ex.w2.weight])
            for m, q in ((ex.w1, q1), (ex.w3, q3), (ex.w2, q2)):
                m.weight.copy_(q.to(m.weight.device, m.weight.dtype))
