"""The MiniMax-M3 / M3.1 text model (model.md sections 1, 2, 7; msa.md) as torch nn.Modules.

Parameter names mirror the text-only checkpoint names (`model.layers.N.self_attn.q_proj.weight`, `lm_head.weight`, ...),
so a state_dict key is a checkpoint tensor name (a VL checkpoint adds the prefix `language_model.`).

Two entry points:
- `MiniMaxM3ForCausalLM.step(states, tokens, rt)`: inference over a batch of sequences at different lengths, each
  appending 1..n tokens (prefill, chunked prefill, decode, speculative verify) to its KV cache. All attention reads
  the cache, so a token sees its own K/V quantised. Can record selected blocks and hidden-state taps.
- `MiniMaxM3ForCausalLM.forward(input_ids, rt)`: differentiable full-sequence forward for training, same math, no
  cache object: K/V/index-K go through fake quantisation (straight-through) in the KV dtype.

All activations are kept in the compute dtype (float32 by default, float64 optionally); weights are dequantised
exactly to that dtype (NVFP4: (e2m1 * scale) * scale_2 rounded once in float32). No intermediate BF16 rounding.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
import torch.nn as nn
import torch.nn.functional as F

from . import attention as A
from .config import ModelConfig
from .formats import (mxfp8_fake_quant, nvfp4_weight_dequant, nvfp4_weight_quantize, ste, w4a4_fc1_input,
                      w4a4_fc2_input, e4m3)
from .kv_cache import SequenceState, kv_fake_quant


@dataclass
class Runtime:
    """How to run the model. Defaults are the engine's defaults."""
    mode: str = "exact"              # "exact" | "q8kv4" (msa.md section 5)
    kv_dtype: str | None = None      # "nvfp4" | "fp8" | "bf16"; None = the config's default
    topk_method: str = "keyed"       # "keyed" (msa.md section 3, default) | "float" (exact float top-k)
    force_dense: bool = False        # every layer uses dense attention
    topk_blocks: int | None = None   # override sparse_topk_blocks
    q_chunk: int = 256               # queries per attention chunk (memory bound only)
    mxfp8_act_quant: bool = False    # quantise inputs of MXFP8 linears to MXFP8 (OCP rule); off by default
    attn_impl: str = "manual"        # "manual" | "sdpa" (torch >= 2, exact mode; training speed)
    # training only
    kv_fake_quant: bool = True       # fake-quantise K/V/index-K in forward() like the cache would
    weight_fake_quant: bool = False  # QAT: fake-quantise weights to their checkpoint format in forward()
    index_stopgrad: bool = True      # the index branch sees stopgrad(normed hidden), as in MSA training


# ----------------------------------------------------------------------------------------------------------------
# Building blocks
# ----------------------------------------------------------------------------------------------------------------
class GemmaRMSNorm(nn.Module):
    """y = x * rsqrt(mean(x^2) + eps) * (1 + w) over the last dim."""

    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(dim))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * (1.0 + self.weight)


class QLinear(nn.Module):
    """y = x W^T. `weight` holds the float weight (dequantised exactly when loaded from a quantised checkpoint).
    `fmt` is the checkpoint storage format: "bf16" | "f16" | "f32" | "mxfp8" | "nvfp4"."""

    def __init__(self, in_features: int, out_features: int, fmt: str = "bf16"):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(out_features, in_features))
        self.fmt = fmt
        self.nvfp4_scale_2: float | None = None  # set when loaded from / written to NVFP4
        self.fake_quant = False

    def effective_weight(self):
        w = self.weight
        if not self.fake_quant:
            return w
        with torch.no_grad():
            if self.fmt == "mxfp8":
                wq = mxfp8_fake_quant(w.float()).to(w.dtype)
            elif self.fmt == "nvfp4":
                q = nvfp4_weight_quantize(w.float(), self.nvfp4_scale_2)
                wq = nvfp4_weight_dequant(q.packed, q.scale_codes, q.scale_2).to(w.dtype)
            elif self.fmt == "bf16":
                wq = w.to(torch.bfloat16).to(w.dtype)
            else:
                wq = w
        return ste(w, wq)

    def forward(self, x, act_quant: bool = False):
        if act_quant and self.fmt == "mxfp8":
            x = ste(x, mxfp8_fake_quant(x.detach()))
        return F.linear(x, self.effective_weight())


def swigluoai(gate, up, alpha: float, limit: float):
    """out = g * sigmoid(alpha * g) * (u + 1), g = min(gate, limit), u = clamp(up, -limit, limit)."""
    g = torch.clamp(gate, max=limit)
    u = torch.clamp(up, min=-limit, max=limit)
    return g * torch.sigmoid(alpha * g) * (u + 1.0)


class Rotary:
    """Partial NeoX RoPE: inv_freq_i = theta^(-2i/rotary_dim); pairs (i, i + rotary_dim/2) in the first rotary_dim
    dims; cos/sin computed in float64 and rounded to the compute dtype (float32)."""

    def __init__(self, rotary_dim: int, theta: float):
        self.rotary_dim = rotary_dim
        half = rotary_dim // 2
        self.inv_freq = torch.tensor([theta ** (-(2.0 * i) / rotary_dim) for i in range(half)], dtype=torch.float64)

    def cos_sin(self, pos: torch.Tensor, dtype):
        """cos/sin as float32 values (also in float64 compute, where they are then widened exactly)."""
        ang = pos.to(torch.float64).unsqueeze(-1) * self.inv_freq.to(pos.device)
        return torch.cos(ang).to(torch.float32).to(dtype), torch.sin(ang).to(torch.float32).to(dtype)

    def apply(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        """x [N, H, D], cos/sin [N, rotary_dim/2]."""
        h = self.rotary_dim // 2
        c, s = cos.unsqueeze(1), sin.unsqueeze(1)
        x1, x2, rest = x[..., :h], x[..., h:2 * h], x[..., 2 * h:]
        return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s, rest], dim=-1)


class MLP(nn.Module):
    """Dense MLP and shared expert: down(swigluoai(gate(x), up(x)))."""

    def __init__(self, hidden: int, inter: int, cfg: ModelConfig):
        super().__init__()
        self.gate_proj = QLinear(hidden, inter)
        self.up_proj = QLinear(hidden, inter)
        self.down_proj = QLinear(inter, hidden)
        self.alpha, self.limit = cfg.swiglu_alpha, cfg.swiglu_limit

    def forward(self, x, rt: Runtime):
        aq = rt.mxfp8_act_quant
        h = swigluoai(self.gate_proj(x, aq), self.up_proj(x, aq), self.alpha, self.limit)
        return self.down_proj(h, aq)


class Expert(nn.Module):
    """A routed expert: w1 = gate, w3 = up, w2 = down. With W4A4 (M3.1) the FC1 and FC2 inputs are NVFP4-quantised
    as model.md section 4 says (whatever the weights' format)."""

    def __init__(self, hidden: int, inter: int, cfg: ModelConfig):
        super().__init__()
        self.w1 = QLinear(hidden, inter)
        self.w3 = QLinear(hidden, inter)
        self.w2 = QLinear(inter, hidden)
        self.alpha, self.limit, self.w4a4 = cfg.swiglu_alpha, cfg.swiglu_limit, cfg.w4a4

    def forward(self, x, rt: Runtime):
        if self.w4a4:
            xq, f1 = w4a4_fc1_input(x.detach())
            xq = ste(x * (1.0 / f1.clamp(min=1e-30)), xq) if x.requires_grad else xq
            g = self.w1(xq) * f1
            u = self.w3(xq) * f1
            h = swigluoai(g, u, self.alpha, self.limit)
            hq, f2 = w4a4_fc2_input(h.detach())
            hq = ste(h * 16.0, hq) if h.requires_grad else hq
            return self.w2(hq) * f2
        aq = rt.mxfp8_act_quant
        return self.w2(swigluoai(self.w1(x, aq), self.w3(x, aq), self.alpha, self.limit), aq)


class Router(nn.Module):
    def __init__(self, hidden: int, n_experts: int):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(n_experts, hidden))


class MoE(nn.Module):
    """Sigmoid routing with correction bias (selection only), top-k with ties to the lower expert id, weights = chosen
    sigmoid scores renormalised by their plain sum times routed_scaling_factor; shared expert added with weight 1."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.gate = Router(cfg.hidden_size, cfg.num_experts)
        self.e_score_correction_bias = nn.Parameter(torch.zeros(cfg.num_experts))
        self.experts = nn.ModuleList(Expert(cfg.hidden_size, cfg.intermediate_size, cfg)
                                     for _ in range(cfg.num_experts))
        self.shared_experts = MLP(cfg.hidden_size, cfg.shared_intermediate_size, cfg) if cfg.n_shared_experts else None
        self.top_k, self.use_bias, self.rsf = cfg.top_k_experts, cfg.use_routing_bias, cfg.routed_scaling_factor

    def route(self, x):
        logits = F.linear(x, self.gate.weight)
        s = torch.sigmoid(logits)
        choice = s + self.e_score_correction_bias if self.use_bias else s
        srt = torch.sort(choice.detach(), dim=-1, descending=True, stable=True)
        ids = srt.indices[:, :self.top_k]
        # gap between the last chosen and the first unchosen biased score (how close the choice is to a tie)
        self.last_margin = (srt.values[:, self.top_k - 1] - srt.values[:, self.top_k]
                            if self.top_k < srt.values.shape[1] else torch.full_like(srt.values[:, 0], math.inf))
        w = s.gather(-1, ids)
        w = w / w.sum(-1, keepdim=True) * self.rsf
        return ids, w

    def forward(self, x, rt: Runtime):
        ids, w = self.route(x)
        out = torch.zeros_like(x)
        # per slot, in rank order: out = sum_r w_r * expert_{id_r}(x)
        ys = x.new_zeros((self.top_k,) + x.shape)
        for e in torch.unique(ids).tolist():
            rows, slot = torch.nonzero(ids == e, as_tuple=True)
            ys[slot, rows] = self.experts[e](x[rows], rt)
        for r in range(self.top_k):
            out = out + w[:, r:r + 1] * ys[r]
        if self.shared_experts is not None:
            out = out + self.shared_experts(x, rt)
        return out


# ----------------------------------------------------------------------------------------------------------------
# Attention layer
# ----------------------------------------------------------------------------------------------------------------
class SelfAttention(nn.Module):
    def __init__(self, cfg: ModelConfig, msa: bool):
        super().__init__()
        H, Hkv, D, hid = cfg.num_heads, cfg.num_kv_heads, cfg.head_dim, cfg.hidden_size
        self.q_proj = QLinear(hid, H * D)
        self.k_proj = QLinear(hid, Hkv * D)
        self.v_proj = QLinear(hid, Hkv * D)
        self.o_proj = QLinear(H * D, hid)
        self.q_norm = GemmaRMSNorm(D, cfg.rms_norm_eps)
        self.k_norm = GemmaRMSNorm(D, cfg.rms_norm_eps)
        self.msa = msa
        if msa:
            self.index_q_proj = QLinear(hid, cfg.num_index_heads * cfg.index_dim)
            self.index_k_proj = QLinear(hid, cfg.index_dim)
            self.index_q_norm = GemmaRMSNorm(cfg.index_dim, cfg.rms_norm_eps)
            self.index_k_norm = GemmaRMSNorm(cfg.index_dim, cfg.rms_norm_eps)
        self.cfg = cfg

    def project(self, n, cos, sin, rope: Rotary, rt: Runtime):
        """n [N, hidden] -> q [N, H, D], k, v [N, Hkv, D], iq [N, G, Di] | None, ik [N, Di] | None."""
        c = self.cfg
        N = n.shape[0]
        aq = rt.mxfp8_act_quant
        q = self.q_proj(n, aq).view(N, c.num_heads, c.head_dim)
        k = self.k_proj(n, aq).view(N, c.num_kv_heads, c.head_dim)
        v = self.v_proj(n, aq).view(N, c.num_kv_heads, c.head_dim)
        q = rope.apply(self.q_norm(q), cos, sin)
        k = rope.apply(self.k_norm(k), cos, sin)
        iq = ik = None
        if self.msa:
            ni = n.detach() if (rt.index_stopgrad and n.requires_grad) else n
            iq = self.index_q_proj(ni, aq).view(N, c.num_index_heads, c.index_dim)
            ik = self.index_k_proj(ni, aq).view(N, 1, c.index_dim)
            iq = rope.apply(self.index_q_norm(iq), cos, sin)
            ik = rope.apply(self.index_k_norm(ik), cos, sin).view(N, c.index_dim)
        return q, k, v, iq, ik

    def sparse(self, rt: Runtime) -> bool:
        return self.msa and not rt.force_dense

    def attend(self, q, k_read, v_read, iq, ik_read, pos, rt: Runtime, record: dict | None = None,
               aux: dict | None = None):
        """One group of sequences sharing kv length: q [B, Tq, H, D], k_read/v_read [B, Tk, Hkv, D] as read from the
        cache (already in the mode's operand form), iq [B, Tq, G, Di], ik_read [B, Tk, Di]. Returns [B, Tq, H, D]."""
        c = self.cfg
        if rt.mode == "q8kv4":
            q = e4m3(q, saturate=True)
        sel = None
        if self.sparse(rt):
            if rt.mode == "q8kv4":
                iq = e4m3(iq, saturate=True)
            with torch.no_grad():
                bs = A.block_scores(iq.detach(), ik_read.detach(), pos, c.block_size)
                sel = A.select_blocks(bs, pos, rt.topk_blocks or c.topk_blocks, c.block_size, rt.topk_method)
            if record is not None:
                record["sel"] = sel
                record["block_scores"] = bs
            if aux is not None:
                aux["index_scores"] = torch.einsum("btgd,bjd->bgtj", iq, ik_read) / math.sqrt(c.index_dim)
                aux["sel"] = sel
        probs = [] if aux is not None else None
        o = A.attend(q, k_read, v_read, pos, sel, c.block_size, rt.mode, rt.q_chunk, rt.attn_impl, probs)
        if aux is not None and probs:
            aux["probs"] = torch.cat(probs, dim=3)  # [B, Hkv, gqa, Tq, Tk]
        return o


class DecoderLayer(nn.Module):
    def __init__(self, cfg: ModelConfig, idx: int):
        super().__init__()
        self.idx = idx
        self.input_layernorm = GemmaRMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.post_attention_layernorm = GemmaRMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.self_attn = SelfAttention(cfg, cfg.msa_layers[idx])
        self.is_moe = cfg.moe_layers[idx]
        if self.is_moe:
            self.block_sparse_moe = MoE(cfg)
        else:
            self.mlp = MLP(cfg.hidden_size, cfg.dense_intermediate_size, cfg)

    def ffn(self, h, rt):
        n = self.post_attention_layernorm(h)
        return h + (self.block_sparse_moe(n, rt) if self.is_moe else self.mlp(n, rt))


class MiniMaxM3Model(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        nn.init.zeros_(self.embed_tokens.weight)
        self.layers = nn.ModuleList(DecoderLayer(cfg, i) for i in range(cfg.num_layers))
        self.norm = GemmaRMSNorm(cfg.hidden_size, cfg.rms_norm_eps)


@dataclass
class StepResult:
    logits: list                                   # per sequence [q_len, V] (or [1, V] with logits="last")
    taps: dict = field(default_factory=dict)       # layer -> per sequence [q_len, hidden] residual after the layer
    selections: dict = field(default_factory=dict)  # layer -> per sequence {"sel": [q_len, G, k], "block_scores":
    #                                                  [G, q_len, NB], "pos": [q_len]}
    routing: dict = field(default_factory=dict)     # MoE layer -> per sequence [q_len] routing margin (recorded
    #                                                  layers only): last chosen minus first unchosen biased score


class MiniMaxM3ForCausalLM(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.model = MiniMaxM3Model(cfg)
        self.lm_head = QLinear(cfg.hidden_size, cfg.vocab_size)
        self.rope = Rotary(cfg.rotary_dim, cfg.rope_theta)

    # -- helpers --------------------------------------------------------------------------------------------------
    @property
    def dtype(self):
        return self.lm_head.weight.dtype

    @property
    def device(self):
        return self.lm_head.weight.device

    def linears(self):
        return [m for m in self.modules() if isinstance(m, QLinear)]

    def set_weight_fake_quant(self, on: bool):
        for m in self.linears():
            m.fake_quant = on

    def kv_dtype(self, rt: Runtime) -> str:
        return rt.kv_dtype or self.cfg.kv_cache_quant_algo

    def new_sequence(self, rt: Runtime) -> SequenceState:
        return SequenceState(self.cfg.msa_layers, self.kv_dtype(rt))

    def _lm_head(self, h):
        return F.linear(self.model.norm(h), self.lm_head.effective_weight())

    # -- inference ------------------------------------------------------------------------------------------------
    @torch.no_grad()
    def step(self, states: list, tokens: list, rt: Runtime, taps=(), record_layers=(), logits: str = "all"):
        """Append tokens[i] (a list of ids, >= 1) to sequence states[i] and run the model on them.
        logits: "all" (every new token), "last" (only the last new token of each sequence) or "none"."""
        dev, dt = self.device, self.dtype
        lens = [len(t) for t in tokens]
        assert all(n >= 1 for n in lens) and len(states) == len(tokens)
        ids = torch.tensor([t for ts in tokens for t in ts], dtype=torch.int64, device=dev)
        if int(ids.min()) < 0 or int(ids.max()) >= self.cfg.vocab_size:
            raise ValueError("token id out of range of the vocabulary")
        pos_list = [A.query_positions(len(s) + n, n, dev) for s, n in zip(states, lens)]
        pos = torch.cat(pos_list)
        cos, sin = self.rope.cos_sin(pos, dt)
        offs = [0]
        for n in lens:
            offs.append(offs[-1] + n)
        x = F.embedding(ids, self.model.embed_tokens.weight)
        res = StepResult(logits=[])
        taps = set(taps)
        for li, layer in enumerate(self.model.layers):
            at = layer.self_attn
            n_ = layer.input_layernorm(x)
            q, k, v, iq, ik = at.project(n_, cos, sin, self.rope, rt)
            o = torch.empty_like(q)
            recs = []
            for si, st in enumerate(states):
                a, b = offs[si], offs[si + 1]
                kv = st.layers[li]
                kv.insert(k[a:b], v[a:b], ik[a:b] if ik is not None else None)
                kr, vr, ikr = kv.read(rt.mode)
                rec = {} if li in record_layers else None
                o[a:b] = at.attend(q[a:b].unsqueeze(0), kr.unsqueeze(0), vr.unsqueeze(0),
                                   iq[a:b].unsqueeze(0) if iq is not None else None,
                                   ikr.unsqueeze(0) if ikr is not None else None, pos_list[si], rt, rec)[0]
                if rec is not None and "sel" in rec:
                    recs.append({"sel": rec["sel"][0], "block_scores": rec["block_scores"][0], "pos": pos_list[si]})
            if recs:
                res.selections[li] = recs
            h = x + at.o_proj(o.reshape(o.shape[0], -1), rt.mxfp8_act_quant)
            x = layer.ffn(h, rt)
            if li in taps:
                res.taps[li] = [x[offs[i]:offs[i + 1]].clone() for i in range(len(states))]
            if li in record_layers and layer.is_moe:
                mg = layer.block_sparse_moe.last_margin
                res.routing[li] = [mg[offs[i]:offs[i + 1]] for i in range(len(states))]
        for st, ts in zip(states, tokens):
            st.tokens.extend(int(t) for t in ts)
        if logits == "all":
            lg = self._lm_head(x)
            res.logits = [lg[offs[i]:offs[i + 1]] for i in range(len(states))]
        elif logits == "last":
            last = torch.tensor([o - 1 for o in offs[1:]], device=dev)
            lg = self._lm_head(x[last])
            res.logits = [lg[i:i + 1] for i in range(len(states))]
        return res

    # -- training / full sequence ---------------------------------------------------------------------------------
    def forward(self, input_ids: torch.Tensor, rt: Runtime | None = None, taps=(), aux: dict | None = None,
                kv_dtype: str | None = "config"):
        """Differentiable forward of full sequences [B, T] (all of equal length, positions 0..T-1). Equivalent to
        step() on fresh sequences. kv_dtype: "config" = the runtime/config KV dtype, None = no KV quantisation.
        aux (optional dict) receives per MSA layer index scores, selections and attention probabilities (for the
        indexer's KL objective); taps: layers whose output residual is returned in aux["taps"]."""
        rt = rt or Runtime()
        B, T = input_ids.shape
        c = self.cfg
        dev, dt = self.device, self.dtype
        kvd = self.kv_dtype(rt) if kv_dtype == "config" else kv_dtype
        if not rt.kv_fake_quant:
            kvd = None
        pos = torch.arange(T, device=dev)
        cos, sin = self.rope.cos_sin(pos.repeat(B), dt)
        x = F.embedding(input_ids.reshape(-1), self.model.embed_tokens.weight)
        tap_out = {}
        for li, layer in enumerate(self.model.layers):
            at = layer.self_attn
            q, k, v, iq, ik = at.project(layer.input_layernorm(x), cos, sin, self.rope, rt)
            kr, vr = kv_fake_quant(k, kvd), kv_fake_quant(v, kvd)
            ikr = kv_fake_quant(ik, kvd) if ik is not None else None
            if rt.mode == "q8kv4":
                kr, vr = ste(kr, e4m3(kr.detach())), ste(vr, e4m3(vr.detach()))
                ikr = ste(ikr, e4m3(ikr.detach())) if ikr is not None else None
            la = {} if (aux is not None and at.sparse(rt)) else None
            o = at.attend(q.view(B, T, c.num_heads, c.head_dim), kr.view(B, T, c.num_kv_heads, c.head_dim),
                          vr.view(B, T, c.num_kv_heads, c.head_dim),
                          iq.view(B, T, c.num_index_heads, c.index_dim) if iq is not None else None,
                          ikr.view(B, T, c.index_dim) if ikr is not None else None, pos, rt, None, la)
            if la is not None:
                aux.setdefault("layers", {})[li] = la
            h = x + at.o_proj(o.reshape(B * T, -1), rt.mxfp8_act_quant)
            x = layer.ffn(h, rt)
            if li in taps:
                tap_out[li] = x.view(B, T, -1)
        if aux is not None:
            aux["taps"] = tap_out
        return self._lm_head(x).view(B, T, -1)
