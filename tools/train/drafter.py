"""DSpark block drafter for the default model (dspark.md; background msa.md section 6), in PyTorch.

Shape (see tools/train/README.md for the checkpoint format):
- Conditioning: the target's residual stream after the tap layers, concatenated per token and projected by
  `fc` [hidden, n_taps * hidden], then `hidden_norm` (Gemma RMSNorm). Context K/V of every drafter layer are that
  layer's k_proj/v_proj (+ k_norm, RoPE at the token's position) of these projected states.
- A block of B positions: the anchor token (the last token the target produced, position n) and B - 1 mask tokens
  (positions n+1 .. n+B-1), embedded with the target's embeddings. Output position j predicts token n + j + 1, so
  one pass drafts B tokens.
- Decoder layers of the target's style (Gemma norms, per-head q/k norm, partial RoPE, swigluoai MLP). Block queries
  attend to all keys of their own block (non-causal) and to the context keys in the sliding window
  [n - window, n - 1].
- `norm`, then the target's lm_head: U_j. Markov head (rank r): logits_j = U_j + W2 @ W1[x_j], x_j = the token at
  position n + j (the anchor for j = 0, else the previously drafted token), so drafting samples left to right.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
import torch.nn as nn
import torch.nn.functional as F

from model import MLP, GemmaRMSNorm, Rotary, linear


@dataclass
class DrafterConfig:
    hidden_size: int = 256
    num_layers: int = 2
    num_heads: int = 4
    num_kv_heads: int = 2
    head_dim: int = 128
    rotary_dim: int = 64
    rope_theta: float = 5_000_000.0
    rms_norm_eps: float = 1e-6
    intermediate_size: int = 384
    swiglu_alpha: float = 1.702
    swiglu_limit: float = 7.0
    target_layer_ids: list = field(default_factory=lambda: [1, 3, 5])
    block_size: int = 7
    sliding_window: int = 1024
    markov_rank: int = 32
    mask_token_id: int = 4095
    vocab_size: int = 4096


class DraftAttention(nn.Module):
    def __init__(self, c: DrafterConfig):
        super().__init__()
        H, Hkv, D, hid = c.num_heads, c.num_kv_heads, c.head_dim, c.hidden_size
        self.q_proj, self.k_proj = linear(hid, H * D), linear(hid, Hkv * D)
        self.v_proj, self.o_proj = linear(hid, Hkv * D), linear(H * D, hid)
        self.q_norm, self.k_norm = GemmaRMSNorm(D, c.rms_norm_eps), GemmaRMSNorm(D, c.rms_norm_eps)
        self.c = c

    def kv(self, x, cos, sin, rope):
        B, T, _ = x.shape
        c = self.c
        k = rope.apply(self.k_norm(self.k_proj(x).view(B, T, c.num_kv_heads, c.head_dim)), cos, sin)
        return k, self.v_proj(x).view(B, T, c.num_kv_heads, c.head_dim).float()

    def forward(self, n, qcos, qsin, ctx_k, ctx_v, mask, rope):
        """n [B, Q, hid] block states; ctx_k/v [B, C, Hkv, D]; mask [Q, C + Q] bool."""
        B, Q, _ = n.shape
        c = self.c
        q = rope.apply(self.q_norm(self.q_proj(n).view(B, Q, c.num_heads, c.head_dim)), qcos, qsin)
        bk, bv = self.kv(n, qcos, qsin, rope)
        k = torch.cat([ctx_k, bk], 1)
        v = torch.cat([ctx_v, bv], 1)
        gqa = c.num_heads // c.num_kv_heads
        qh = q.transpose(1, 2)
        kh = k.repeat_interleave(gqa, 2).transpose(1, 2)
        vh = v.repeat_interleave(gqa, 2).transpose(1, 2)
        if hasattr(F, "scaled_dot_product_attention"):
            o = F.scaled_dot_product_attention(qh, kh, vh, attn_mask=mask[None, None])
        else:
            lg = torch.matmul(qh.float(), kh.float().transpose(-1, -2)) / math.sqrt(c.head_dim)
            o = torch.matmul(torch.softmax(lg.masked_fill(~mask, -math.inf), -1), vh.float())
        return self.o_proj(o.transpose(1, 2).reshape(B, Q, -1))


class DraftLayer(nn.Module):
    def __init__(self, c: DrafterConfig):
        super().__init__()
        self.input_layernorm = GemmaRMSNorm(c.hidden_size, c.rms_norm_eps)
        self.post_attention_layernorm = GemmaRMSNorm(c.hidden_size, c.rms_norm_eps)
        self.self_attn = DraftAttention(c)
        self.mlp = MLP(c.hidden_size, c.intermediate_size, c)


class MarkovHead(nn.Module):
    def __init__(self, c: DrafterConfig):
        super().__init__()
        self.w1 = nn.Embedding(c.vocab_size, c.markov_rank)   # W1[x]: the previous token's code
        self.w2 = linear(c.markov_rank, c.vocab_size)          # W2: rank -> vocabulary logits

    def forward(self, prev_ids):
        return self.w2(self.w1(prev_ids))


class DSparkDrafter(nn.Module):
    def __init__(self, c: DrafterConfig):
        super().__init__()
        self.c = c
        self.fc = linear(len(c.target_layer_ids) * c.hidden_size, c.hidden_size)
        self.hidden_norm = GemmaRMSNorm(c.hidden_size, c.rms_norm_eps)
        self.layers = nn.ModuleList(DraftLayer(c) for _ in range(c.num_layers))
        self.norm = GemmaRMSNorm(c.hidden_size, c.rms_norm_eps)
        self.markov_head = MarkovHead(c)
        self.rope = Rotary(c.rotary_dim, c.rope_theta)

    def init_weights(self, seed):
        g = torch.Generator().manual_seed(seed)
        for name, p in self.named_parameters():
            with torch.no_grad():
                if name.endswith("norm.weight"):
                    p.zero_()
                elif name.startswith("markov_head.w2"):
                    p.zero_()  # starts as the plain drafter
                else:
                    p.copy_(torch.randn(p.shape, generator=g) * 0.02)

    def block_mask(self, anchors, T, device):
        """[M*B, T + M*B] bool: block m's queries see context keys in [a_m - window, a_m - 1] and their own block."""
        c = self.c
        M = anchors.shape[0]
        Bk = c.block_size
        j = torch.arange(T, device=device)
        a = anchors.repeat_interleave(Bk)  # [M*B]
        ctx = (j[None, :] < a[:, None]) & (j[None, :] >= a[:, None] - c.sliding_window)
        blk = torch.arange(M, device=device).repeat_interleave(Bk)
        own = blk[:, None] == blk[None, :]
        return torch.cat([ctx, own], 1)

    def forward(self, taps, embed, lm_head, anchor_ids, prev_ids, anchors):
        """taps [B, T, n_taps*hid] target states of the context tokens (position = index); anchors [M] positions
        (shared by the batch); anchor_ids [B, M] tokens at the anchors; prev_ids [B, M, Bk] Markov inputs (token at
        a_m + j). Returns logits [B, M, Bk, V]: entry j predicts the token at a_m + j + 1."""
        c = self.c
        B, T, _ = taps.shape
        M, Bk = anchors.shape[0], c.block_size
        dev = taps.device
        ctx = self.hidden_norm(self.fc(taps))
        cos, sin = self.rope.cos_sin(T + Bk, dev)
        qpos = (anchors[:, None] + torch.arange(Bk, device=dev)[None, :]).reshape(-1)
        qcos, qsin = cos[qpos], sin[qpos]
        ids = torch.full((B, M, Bk), c.mask_token_id, dtype=torch.long, device=dev)
        ids[:, :, 0] = anchor_ids
        h = embed(ids.reshape(B, M * Bk)).float()
        mask = self.block_mask(anchors, T, dev)
        for layer in self.layers:
            ck, cv = layer.self_attn.kv(ctx, cos[:T], sin[:T], self.rope)
            h = h + layer.self_attn(layer.input_layernorm(h), qcos, qsin, ck, cv, mask, self.rope).float()
            h = h + layer.mlp(layer.post_attention_layernorm(h)).float()
        u = lm_head(self.norm(h)).float().view(B, M, Bk, -1)
        return u + self.markov_head(prev_ids).float()

    @torch.no_grad()
    def draft(self, taps, embed, lm_head, anchor_id):
        """Greedy drafting of one block after a context of T tokens (taps [1, T, n_taps*hid]) and the anchor token at
        position T. Returns B drafted ids (the Markov term uses each previously drafted token)."""
        c = self.c
        T = taps.shape[1]
        anchors = torch.tensor([T], device=taps.device)
        prev = torch.zeros(1, 1, c.block_size, dtype=torch.long, device=taps.device)
        # The block pass does not depend on prev: compute U once, then add the Markov term left to right.
        u = self.forward(taps, embed, lm_head, torch.tensor([[anchor_id]], device=taps.device), prev, anchors)
        u = u - self.markov_head(prev).float()
        out, x = [], anchor_id
        for j in range(c.block_size):
            lg = u[0, 0, j] + self.markov_head(torch.tensor([x], device=taps.device)).float()[0]
            x = int(torch.argmax(lg))
            out.append(x)
        return out


def drafter_loss(drafter: DSparkDrafter, target, x, taps, tlog, anchors, gamma: float = 4.0):
    """Training objective for one batch: at every anchor a_m the drafter sees the target's taps of tokens before
    a_m, the token at a_m and B - 1 masks; position j is trained towards the target's distribution for token
    a_m + j + 1 (0.9 KL(target || drafter) + 0.1 cross-entropy on the real next token), weighted exp(-j / gamma)
    since later positions only count when every earlier one is accepted. Returns (loss, kl, ce, top-1 hits)."""
    dc = drafter.c
    dev = x.device
    offs = anchors[:, None] + torch.arange(dc.block_size, device=dev)[None, :]  # [M, Bk] input positions
    prev = x[:, offs]             # token at a_m + j (the Markov head's input)
    tgt = x[:, offs + 1]          # the real next token
    p_t = torch.softmax(tlog[:, offs], -1)
    lg = drafter(taps, target.model.embed_tokens, target.lm_head, x[:, anchors], prev, anchors)
    logq = torch.log_softmax(lg.float(), -1)
    kl = (p_t * (torch.log(p_t.clamp(min=1e-30)) - logq)).sum(-1)  # [B, M, Bk]
    ce = -logq.gather(-1, tgt.unsqueeze(-1)).squeeze(-1)
    pos_w = torch.exp(-torch.arange(dc.block_size, dtype=torch.float32, device=dev) / gamma)
    loss = ((0.9 * kl + 0.1 * ce) * pos_w).sum(-1).mean() / pos_w.sum()
    with torch.no_grad():
        hit = (lg.argmax(-1) == p_t.argmax(-1)).float()
    return loss, kl.mean(), ce.mean(), hit
