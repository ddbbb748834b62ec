"""KV cache of the reference: contiguous per (sequence, layer), quantised on insert (msa.md section 6, formats.md
sections 3 and 5). Block b of a sequence = positions [128b, 128b + 127] (logical ids; no page table needed here).

Stored per layer: K and V [T, Hkv, D] and, for MSA layers, index-K [T, Di], each in the chosen KV dtype:
  nvfp4: E2M1 codes + one E4M3 scale per 16 channels (formats.md section 3 quantiser, no global scale)
  fp8:   E4M3 satfinite RNE cast, no scale (our choice; the spec names FP8 E4M3 without a scale)
  bf16:  RNE cast
Next to the codes the cache keeps the decoded values (exact for every dtype), and the Q8KV4 operand view
E4M3_satfinite_RN(decoded) (for NVFP4 that is the "one rounding" dequantisation of formats.md section 4).
"""
from __future__ import annotations

import torch

from .config import KV_DTYPES
from .formats import bf16, e4m3, e4m3_encode, e4m3_decode, nvfp4_quantize_kv, pack_nibbles, ste


def quantize_kv(x: torch.Tensor, kv_dtype: str):
    """Returns (decoded values in x's dtype, raw storage dict)."""
    if kv_dtype == "nvfp4":
        q = nvfp4_quantize_kv(x)
        return q.dequant_exact(x.dtype), {"codes": q.codes, "scales": q.scale_codes}
    if kv_dtype == "fp8":
        c = e4m3_encode(x, saturate=True)
        return e4m3_decode(c, x.dtype), {"codes": c}
    if kv_dtype == "bf16":
        return bf16(x), {}
    raise ValueError(f"unknown KV dtype {kv_dtype!r} (expected one of {KV_DTYPES})")


def kv_fake_quant(x: torch.Tensor, kv_dtype: str | None) -> torch.Tensor:
    """Training: quantise-dequantise with a straight-through gradient (None = no quantisation)."""
    if kv_dtype is None:
        return x
    return ste(x, quantize_kv(x.detach(), kv_dtype)[0])


def q8_operand(x: torch.Tensor) -> torch.Tensor:
    """The E4M3 MMA operand of a cached value (identity on values that are E4M3 already)."""
    return e4m3(x, saturate=True)


class _Stream:
    """One growing [T, ...] tensor family: decoded values, Q8 operands and raw codes."""

    def __init__(self):
        self.val = None
        self.q8 = None
        self.raw: dict = {}
        self.n = 0

    def append(self, dec: torch.Tensor, raw: dict):
        t = dec.shape[0]
        if self.val is None:
            cap = max(256, t)
            self.val = dec.new_empty((cap,) + dec.shape[1:])
            self.q8 = dec.new_empty((cap,) + dec.shape[1:])
            self.raw = {k: v.new_empty((cap,) + v.shape[1:]) for k, v in raw.items()}
        if self.n + t > self.val.shape[0]:
            cap = max(2 * self.val.shape[0], self.n + t)
            self.val = _grow(self.val, cap)
            self.q8 = _grow(self.q8, cap)
            self.raw = {k: _grow(v, cap) for k, v in self.raw.items()}
        self.val[self.n:self.n + t] = dec
        self.q8[self.n:self.n + t] = q8_operand(dec)
        for k, v in raw.items():
            self.raw[k][self.n:self.n + t] = v
        self.n += t

    def view(self, mode: str) -> torch.Tensor:
        return (self.q8 if mode == "q8kv4" else self.val)[:self.n]


def _grow(t: torch.Tensor, cap: int) -> torch.Tensor:
    g = t.new_empty((cap,) + t.shape[1:])
    g[:t.shape[0]] = t
    return g


class LayerKV:
    def __init__(self, kv_dtype: str, has_index: bool):
        if kv_dtype not in KV_DTYPES:
            raise ValueError(f"unknown KV dtype {kv_dtype!r}")
        self.kv_dtype = kv_dtype
        self.k, self.v = _Stream(), _Stream()
        self.ik = _Stream() if has_index else None

    def __len__(self):
        return self.k.n

    def insert(self, k: torch.Tensor, v: torch.Tensor, ik: torch.Tensor | None):
        """k, v [T, Hkv, D] after norm/RoPE (V raw); ik [T, Di] after norm/RoPE."""
        for stream, x in ((self.k, k), (self.v, v), (self.ik, ik)):
            if stream is not None:
                dec, raw = quantize_kv(x, self.kv_dtype)
                stream.append(dec, raw)

    def read(self, mode: str):
        """(K, V, index-K or None) as the attention consumes them in `mode`."""
        return self.k.view(mode), self.v.view(mode), (self.ik.view(mode) if self.ik is not None else None)

    def nvfp4_page_bytes(self, which: str, block: int = 128):
        """formats.md section 5 layout of the stored NVFP4 data for `which` in ("k", "v", "ik"): a list of pages, each
        (data uint8 [H, block, D/2], scales uint8 [H, block, D/16]); a partial last page is zero-padded."""
        assert self.kv_dtype == "nvfp4"
        st = {"k": self.k, "v": self.v, "ik": self.ik}[which]
        codes, scales = st.raw["codes"][:st.n], st.raw["scales"][:st.n]
        if codes.dim() == 2:  # index-K has no head dim
            codes, scales = codes.unsqueeze(1), scales.unsqueeze(1)
        pages = []
        for b in range(0, st.n, block):
            c = torch.zeros((block,) + codes.shape[1:], dtype=torch.uint8, device=codes.device)
            s = torch.zeros((block,) + scales.shape[1:], dtype=torch.uint8, device=codes.device)
            e = min(st.n, b + block)
            c[:e - b], s[:e - b] = codes[b:e], scales[b:e]
            pages.append((pack_nibbles(c).permute(1, 0, 2).contiguous(), s.permute(1, 0, 2).contiguous()))
        return pages


class SequenceState:
    """Per-sequence decoding state: the tokens fed so far and one LayerKV per layer."""

    def __init__(self, msa_layers: list, kv_dtype: str):
        self.kv_dtype = kv_dtype
        self.layers = [LayerKV(kv_dtype, has_index=m) for m in msa_layers]
        self.tokens: list[int] = []

    def __len__(self):
        return len(self.tokens)
