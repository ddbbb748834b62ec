"""Attention for one layer, as functions: MSA index scores, block maxima, top-k block selection and the main-branch
attention over the selected blocks (msa.md sections 2-5). Dense attention is the same with every block selected.

Shapes (B = sequences that share one kv length, e.g. 1 in inference, the batch in training):
  q  [B, Tq, Hq, D]     k, v [B, Tk, Hkv, D]     iq [B, Tq, G, Di]  (G = Hkv index heads)   ik [B, Tk, Di]
  pos [Tq] int64 query positions (bottom-right aligned: pos = kv_len - q_len + i; may be negative)
  sel [B, Tq, G, k] int64 selected block ids, -1 padded, local block in the last valid slot.

Numerics modes (msa.md section 5):
  "exact": operands as given (the caller passes K/V/index-K as read from the cache, dequantised exactly),
           P unquantised.
  "q8kv4": every MMA operand is E4M3: Q and index-Q are cast (satfinite RNE, no scale), K/V/index-K are rounded once
           to E4M3 (for an NVFP4 cache that is E4M3_satfinite_RN(e2m1 * scale)); P (after subtracting the row max)
           times 448 is cast to E4M3 for the PV product and the result divided by 448; the softmax denominator is the
           sum of the unquantised FP32 P. The caller does the operand rounding (see model.py); `attend` rounds P.
  Our choice: q8kv4 uses one softmax over the union of the selected blocks (the decode reference's structure) for
  prefill and decode alike, so prefill and decode agree up to FP32 summation order.
"""
from __future__ import annotations

import math

import torch

from .formats import E4M3, fma32, round_nonneg_in_range

KEY_BITS_LIMIT = 8192  # msa.md: at most 8192 blocks per row for the 16-bit keyed selection


def query_positions(kv_len: int, q_len: int, device=None) -> torch.Tensor:
    return torch.arange(q_len, dtype=torch.int64, device=device) + (kv_len - q_len)


def block_scores(iq: torch.Tensor, ik: torch.Tensor, pos: torch.Tensor, block: int,
                 q_chunk: int = 512) -> torch.Tensor:
    """S(t, b) = max over keys j of block b with j <= pos(t) of iq_g(t) . ik(j) (no 1/sqrt(d) scale).
    Returns [B, G, Tq, NB] (NB = ceil(Tk / block)); blocks with no visible key are -inf."""
    B, Tq, G, Di = iq.shape
    Tk = ik.shape[1]
    NB = (Tk + block - 1) // block
    out = torch.empty(B, G, Tq, NB, dtype=iq.dtype, device=iq.device)
    j = torch.arange(Tk, device=iq.device)
    for s in range(0, Tq, q_chunk):
        e = min(Tq, s + q_chunk)
        tk = max(0, min(Tk, int(pos[s:e].max()) + 1))  # keys beyond the chunk's last position are invisible
        nb = (tk + block - 1) // block
        out[:, :, s:e] = -math.inf
        if nb == 0:
            continue
        sc = torch.einsum("btgd,bjd->bgtj", iq[:, s:e], ik[:, :tk])
        vis = j[:tk].unsqueeze(0) <= pos[s:e].unsqueeze(1)  # [tc, tk]
        sc = sc.masked_fill(~vis, -math.inf)
        if nb * block > tk:
            sc = torch.nn.functional.pad(sc, (0, nb * block - tk), value=-math.inf)
        out[:, :, s:e, :nb] = sc.reshape(B, G, e - s, nb, block).amax(-1)
    return out


def keyed_topk(hist: torch.Tensor, m: int) -> torch.Tensor:
    """msa.md section 3: rank history blocks by the 16-bit quantised key and return the ids of the m largest keys
    (best first). hist [..., n] FP32 block scores of blocks 0..n-1."""
    n = hist.shape[-1]
    assert n <= KEY_BITS_LIMIT, "keyed top-k supports at most 8192 blocks per row"
    h = hist.to(torch.float32)
    mx = h.amax(-1, keepdim=True)
    mn = h.amin(-1, keepdim=True)
    scale = 65534.0 / (mx - mn)
    scale = torch.where(torch.isfinite(scale), scale, torch.zeros_like(scale))
    bias = fma32(-mn, scale, torch.full_like(mn, 1.5))
    qv = fma32(h, scale.expand_as(h), bias.expand_as(h))
    qv = torch.clamp(qv, 0.0, 65535.0)
    q = torch.floor(qv).to(torch.int64)  # the cast to uint32 truncates; qv >= 0
    ids = torch.arange(n, device=hist.device, dtype=torch.int64)
    key = (q << 16) | ((~ids) & 0xFFFF)
    top = torch.topk(key, m, dim=-1).values  # keys are distinct (the id is part of the key)
    return (~top) & 0xFFFF


def float_topk(hist: torch.Tensor, m: int) -> torch.Tensor:
    """Exact float top-k: score descending, ties to the lower block id (stable sort). Best first."""
    return torch.sort(hist, dim=-1, descending=True, stable=True).indices[..., :m]


def keyed_step(hist: torch.Tensor) -> torch.Tensor:
    """One quantisation step of a row: (max - min) / 65534 over the history scores."""
    h = hist.to(torch.float32)
    return (h.amax(-1) - h.amin(-1)) / 65534.0


def select_blocks(bs: torch.Tensor, pos: torch.Tensor, topk: int, block: int, method: str = "keyed") -> torch.Tensor:
    """Top-k block selection per (query, index head), msa.md section 3.
    bs [B, G, Tq, NB] block scores; returns sel [B, Tq, G, topk] int64."""
    B, G, Tq, NB = bs.shape
    sel = torch.full((B, Tq, G, topk), -1, dtype=torch.int64, device=bs.device)
    local = torch.div(pos, block, rounding_mode="floor")
    valid = pos >= 0
    for L in torch.unique(local[valid]).tolist():
        rows = torch.nonzero(valid & (local == L)).squeeze(1)
        if L + 1 <= topk:
            sel[:, rows, :, :L + 1] = torch.arange(L + 1, device=bs.device)
            continue
        hist = bs[:, :, rows, :L]  # [B, G, r, L]: complete, fully visible history blocks
        ids = keyed_topk(hist, topk - 1) if method == "keyed" else float_topk(hist, topk - 1)
        sel[:, rows, :, :topk - 1] = ids.permute(0, 2, 1, 3)
        sel[:, rows, :, topk - 1] = L
    return sel


def selection_token_mask(sel: torch.Tensor, Tk: int, block: int) -> torch.Tensor:
    """[B, Tq, G, k] block ids -> [B, G, Tq, Tk] bool: key j lies in a selected block."""
    B, Tq, G, k = sel.shape
    NB = (Tk + block - 1) // block
    bm = torch.zeros(B, Tq, G, NB + 1, dtype=torch.bool, device=sel.device)
    bm.scatter_(-1, sel + 1, True)  # -1 goes to slot 0, dropped below
    bm = bm[..., 1:]
    blk = torch.arange(Tk, device=sel.device) // block
    return bm[..., blk].permute(0, 2, 1, 3)


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, pos: torch.Tensor, sel: torch.Tensor | None,
           block: int, mode: str = "exact", q_chunk: int = 256, impl: str = "manual",
           probs_out: list | None = None) -> torch.Tensor:
    """Main-branch attention. sel None = dense causal attention. Returns [B, Tq, Hq, D]; rows with pos < 0 are 0.

    Logits are (q . k) * (1/sqrt(D)) with FP32 accumulation; softmax is exact over the visible keys of the selected
    blocks (key j visible iff j <= pos). impl "sdpa" (torch >= 2.0, exact mode only) is a faster equivalent for
    training. probs_out, if given, receives per chunk the attention probabilities [B, Hkv, gqa, tc, Tk] (training)."""
    B, Tq, Hq, D = q.shape
    Tk, Hkv = k.shape[1], k.shape[2]
    gqa = Hq // Hkv
    scale = 1.0 / math.sqrt(D)
    out = torch.zeros_like(q)
    j = torch.arange(Tk, device=q.device)
    for s in range(0, Tq, q_chunk):
        e = min(Tq, s + q_chunk)
        p_ = pos[s:e]
        tk = max(1, min(Tk, int(p_.max()) + 1))  # later keys are invisible to this chunk
        kc, vc = k[:, :tk], v[:, :tk]
        mask = (j[:tk].unsqueeze(0) <= p_.unsqueeze(1)).view(1, 1, e - s, tk)  # [1, 1, tc, tk]
        if sel is not None:
            mask = mask & selection_token_mask(sel[:, s:e], tk, block)  # [B, G, tc, tk]
        mask = mask.expand(B, Hkv, e - s, tk)
        qc = q[:, s:e].reshape(B, e - s, Hkv, gqa, D)
        if impl == "sdpa" and mode == "exact":
            o = _sdpa(qc, kc, vc, mask, scale)
        else:
            logits = torch.einsum("btkgd,bjkd->bkgtj", qc, kc) * scale
            logits = logits.masked_fill(~mask.unsqueeze(2), -math.inf)  # [B, Hkv, gqa, tc, tk]
            mx = logits.amax(-1, keepdim=True)
            mx = torch.where(torch.isfinite(mx), mx, torch.zeros_like(mx))
            p = torch.exp(logits - mx)  # masked entries: exp(-inf) = 0
            den = p.sum(-1, keepdim=True)
            den = torch.where(den > 0, den, torch.ones_like(den))
            if probs_out is not None:
                probs_out.append(torch.nn.functional.pad(p / den, (0, Tk - tk)))
            if mode == "q8kv4":
                num = torch.einsum("bkgtj,bjkd->bkgtd", round_nonneg_in_range(p * 448.0, E4M3), vc) / 448.0
            else:
                num = torch.einsum("bkgtj,bjkd->bkgtd", p, vc)
            o = (num / den).permute(0, 3, 1, 2, 4).reshape(B, e - s, Hq, D)
        o = torch.where((p_ >= 0).view(1, e - s, 1, 1), o, torch.zeros_like(o))
        out[:, s:e] = o
    return out


def _sdpa(qc, k, v, mask, scale):
    B, tc, Hkv, gqa, D = qc.shape
    qh = qc.reshape(B, tc, Hkv * gqa, D).transpose(1, 2)
    kh = k.repeat_interleave(gqa, dim=2).transpose(1, 2)
    vh = v.repeat_interleave(gqa, dim=2).transpose(1, 2)
    mh = mask.repeat_interleave(gqa, dim=1)
    o = torch.nn.functional.scaled_dot_product_attention(qh, kh, vh, attn_mask=mh, scale=scale)
    return o.transpose(1, 2)
