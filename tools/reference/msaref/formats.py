"""Number formats of formats.md (sections 1-4) and the quantisers of model.md section 4, written from the spec.

Everything works on torch tensors on any device (CPU/CUDA) with torch 1.13 .. 2.x; no float8 dtypes are needed.
Values are carried in float32/float64 tensors; "codes" are uint8 tensors holding the bit patterns.

Rounding is done arithmetically: for |x| in binade [2^e, 2^(e+1)) (e clamped to the format's minimum normal
exponent, which gives the subnormals) the quantum is 2^(e - mantissa_bits) and x / quantum is rounded half to even
(torch.round is RNE). The arithmetic is done in float64, where every step is exact for inputs that are float32 or
float64 values in range, so the result is the correctly rounded value.

Choices where the spec is silent (documented in tools/reference/README.md):
- `e4m3(x, saturate=False)` is the non-saturating ("IEEE-like") cast of float8_e4m3fn: |x| that rounds above 448
  (|x| > 464) and +-inf become NaN. `saturate=True` is "satfinite": clamps to +-448 (inf -> +-448, NaN stays NaN).
- `e5m2(x, saturate=False)` overflows to +-inf like IEEE; `saturate=True` clamps to +-57344.
- E2M1 always saturates to +-6 (the hardware cvt.satfinite.e2m1 behaviour); NaN is not representable in E2M1.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch


# ----------------------------------------------------------------------------------------------------------------
# Scalar formats
# ----------------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class FloatFormat:
    name: str
    mantissa_bits: int
    min_normal_exp: int  # exponent of the smallest normal binade (subnormals share its quantum)
    max_finite: float
    has_inf: bool  # overflow (non-saturating) gives inf when True, NaN when False


E4M3 = FloatFormat("e4m3", 3, -6, 448.0, False)
E5M2 = FloatFormat("e5m2", 2, -14, 57344.0, True)
E2M1 = FloatFormat("e2m1", 1, 0, 6.0, False)
BF16 = FloatFormat("bf16", 7, -126, float.fromhex("0x1.fep127"), True)
FP16 = FloatFormat("fp16", 10, -14, 65504.0, True)
FP32 = FloatFormat("fp32", 23, -126, float.fromhex("0x1.fffffep127"), True)


def round_to_format(x: torch.Tensor, fmt: FloatFormat, saturate: bool) -> torch.Tensor:
    """Round to the nearest value of `fmt`, ties to even. Returns a tensor of x's float dtype (float32 or float64;
    other dtypes are computed in float32). Every value of the formats here is exact in float32.

    Method: with e = max(floor(log2|x|), min_normal_exp) the quantum is q = 2^(e - mantissa_bits); adding and then
    subtracting C = q * 2^p (p = 23 or 52 mantissa bits of the carrier float) makes the carrier's own RNE addition
    round |x| to a multiple of q (|x| < 2q * 2^mantissa_bits <= C, so C + |x| lies in [C, 2C) whose ulp is q).
    Both steps are exact otherwise, so the result is the correctly rounded value."""
    if x.dtype not in (torch.float32, torch.float64):
        x = x.to(torch.float32)
    if x.dtype == torch.float32 and fmt.max_finite > 2.0 ** 100:  # C would overflow a float32 carrier
        return round_to_format(x.to(torch.float64), fmt, saturate).to(torch.float32)
    f64 = x.dtype == torch.float64
    ity, p, bias, ebits = (torch.int64, 52, 1023, 11) if f64 else (torch.int32, 23, 127, 8)
    a = x.abs()
    finite = torch.isfinite(a)
    cap = 2.0 * fmt.max_finite  # anything above rounds out of range; keeps C inside the carrier's range
    ac = torch.where(finite, torch.clamp(a, max=cap), torch.zeros_like(a))
    e = ((ac.view(ity) >> p) & ((1 << ebits) - 1)) - bias  # floor(log2 ac) for normal carriers
    e = torch.clamp(e, min=fmt.min_normal_exp)             # carrier subnormals are below every format's emin
    C = ((e - fmt.mantissa_bits + p + bias) << p).view(x.dtype)
    r = (ac + C) - C
    over = (r > fmt.max_finite) | torch.isinf(a)
    if saturate:
        r = torch.where(over, torch.full_like(r, fmt.max_finite), r)
    else:
        r = torch.where(over, torch.full_like(r, math.inf if fmt.has_inf else math.nan), r)
    r = torch.where(torch.isnan(a), torch.full_like(r, math.nan), r)
    return torch.where(torch.signbit(x), -r, r)


def _pow2(e: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """2^e exactly as float64, for integer tensors e in [-1022, 1023] (built from the bit pattern)."""
    return ((e.to(torch.int64) + 1023) << 52).view(torch.float64).to(like.device)


def round_nonneg_in_range(a: torch.Tensor, fmt: FloatFormat) -> torch.Tensor:
    """round_to_format for inputs known to be finite, >= 0 and <= max_finite (e.g. softmax P * 448): the same
    magic-number rounding without the special-value handling. a: float32 or float64."""
    f64 = a.dtype == torch.float64
    ity, p, bias = (torch.int64, 52, 1023) if f64 else (torch.int32, 23, 127)
    e = torch.clamp((a.view(ity) >> p) - bias, min=fmt.min_normal_exp)
    C = ((e - fmt.mantissa_bits + p + bias) << p).view(a.dtype)
    return (a + C) - C


def e4m3(x: torch.Tensor, saturate: bool = True) -> torch.Tensor:
    return round_to_format(x, E4M3, saturate)


def e5m2(x: torch.Tensor, saturate: bool = False) -> torch.Tensor:
    return round_to_format(x, E5M2, saturate)


def bf16(x: torch.Tensor) -> torch.Tensor:
    """Round to BF16 (RNE) and return in x's float dtype (torch's cast is round-to-nearest-even)."""
    return x.to(torch.bfloat16).to(x.dtype)


def fp16(x: torch.Tensor) -> torch.Tensor:
    return x.to(torch.float16).to(x.dtype)


# --- E2M1 --------------------------------------------------------------------------------------------------------
E2M1_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)


def e2m1_decode(codes: torch.Tensor, dtype=torch.float32) -> torch.Tensor:
    """Codes 0..15 (bit 3 = sign) to values."""
    table = torch.tensor(list(E2M1_VALUES) + [-v for v in E2M1_VALUES], dtype=dtype, device=codes.device)
    return table[codes.long()]


def e2m1_encode(y: torch.Tensor) -> torch.Tensor:
    """Nearest E2M1 code, ties to even, saturating at 6, with the threshold ladder of formats.md section 3.
    -0 (and any value that rounds to 0) is stored as +0 (code 0)."""
    a = y.abs()
    mag = torch.zeros(y.shape, dtype=torch.uint8, device=y.device)
    # ladder: > 0.25 -> 0.5; >= 0.75 -> 1; > 1.25 -> 1.5; >= 1.75 -> 2; > 2.5 -> 3; >= 3.5 -> 4; > 5 -> 6
    for thr, inclusive, code in ((0.25, False, 1), (0.75, True, 2), (1.25, False, 3), (1.75, True, 4),
                                 (2.5, False, 5), (3.5, True, 6), (5.0, False, 7)):
        hit = (a >= thr) if inclusive else (a > thr)
        mag = torch.where(hit, torch.full_like(mag, code), mag)
    neg = (y < 0) & (mag != 0)
    return mag | (neg.to(torch.uint8) << 3)


# --- 8-bit codes -------------------------------------------------------------------------------------------------
def _code_values(ebits: int, mbits: int, ieee: bool, dtype) -> torch.Tensor:
    """Values of the 2^(1+ebits+mbits) codes of a small float with bias 2^(ebits-1) - 1. ieee: the top exponent holds
    inf (mantissa 0) and NaN; otherwise (the "fn" variant) only the all-ones code is NaN."""
    bias, top = (1 << (ebits - 1)) - 1, (1 << ebits) - 1
    vals = []
    for c in range(1 << (1 + ebits + mbits)):
        s, e, m = c >> (ebits + mbits), (c >> mbits) & top, c & ((1 << mbits) - 1)
        if ieee and e == top:
            v = math.inf if m == 0 else math.nan
        elif not ieee and e == top and m == (1 << mbits) - 1:
            v = math.nan
        elif e == 0:
            v = m / (1 << mbits) * 2.0 ** (1 - bias)
        else:
            v = (1.0 + m / (1 << mbits)) * 2.0 ** (e - bias)
        vals.append(-v if s else v)
    return torch.tensor(vals, dtype=dtype)


def e4m3_code_values(dtype=torch.float64) -> torch.Tensor:
    """Value of each of the 256 E4M3 (float8_e4m3fn) codes; 0x7F and 0xFF are NaN."""
    return _code_values(4, 3, False, dtype)


def e5m2_code_values(dtype=torch.float64) -> torch.Tensor:
    """Value of each of the 256 E5M2 codes (IEEE-like: inf and NaN in the top exponent)."""
    return _code_values(5, 2, True, dtype)


_TABLES: dict = {}


def _table(name: str, device) -> torch.Tensor:
    key = (name, str(device))
    if key not in _TABLES:
        t = e4m3_code_values() if name == "e4m3" else e5m2_code_values()
        _TABLES[key] = t.to(device)
    return _TABLES[key]


def e4m3_decode(codes: torch.Tensor, dtype=torch.float32) -> torch.Tensor:
    return _table("e4m3", codes.device)[codes.long()].to(dtype)


def e5m2_decode(codes: torch.Tensor, dtype=torch.float32) -> torch.Tensor:
    return _table("e5m2", codes.device)[codes.long()].to(dtype)


def _encode_by_table(x: torch.Tensor, fmt: FloatFormat, saturate: bool, name: str, n_pos: int,
                     nan_code: int) -> torch.Tensor:
    r = round_to_format(x, fmt, saturate).to(torch.float64)
    pos = _table(name, x.device)[:n_pos].contiguous()  # ascending non-negative values incl. inf for e5m2
    a = r.abs()
    idx = torch.searchsorted(pos, torch.where(torch.isnan(a), torch.zeros_like(a), a).contiguous())
    code = idx.to(torch.int64) | (torch.signbit(r).to(torch.int64) << 7)
    code = torch.where(torch.isnan(r), torch.full_like(code, nan_code), code)
    return code.to(torch.uint8)


def e4m3_encode(x: torch.Tensor, saturate: bool = True) -> torch.Tensor:
    """Round to E4M3 and return its code (NaN -> 0x7F)."""
    return _encode_by_table(x, E4M3, saturate, "e4m3", 127, 0x7F)


def e5m2_encode(x: torch.Tensor, saturate: bool = False) -> torch.Tensor:
    """Round to E5M2 and return its code (inf -> 0x7C, NaN -> 0x7E)."""
    return _encode_by_table(x, E5M2, saturate, "e5m2", 125, 0x7E)


def ue8m0_decode(codes: torch.Tensor, dtype=torch.float32) -> torch.Tensor:
    """UE8M0: 2^(e - 127); 0xFF is NaN."""
    e = codes.to(torch.int64)
    v = _pow2(e - 127, e)
    v = torch.where(e == 255, torch.full_like(v, math.nan), v)
    return v.to(dtype)


def bf16_bits_to_float(bits) -> torch.Tensor:
    """BF16 bit patterns (numpy uint16/int16 array) to a float32 tensor."""
    arr = np.ascontiguousarray(bits).view(np.int16)
    return torch.from_numpy(arr.copy()).view(torch.bfloat16).to(torch.float32)


def float_to_bf16_bits(x: torch.Tensor) -> np.ndarray:
    """float tensor -> BF16 (RNE) bit patterns as a numpy uint16 array."""
    b = x.detach().to(torch.float32).to(torch.bfloat16).cpu().contiguous().view(torch.int16)
    return b.numpy().view(np.uint16)


# ----------------------------------------------------------------------------------------------------------------
# Exact fused multiply-add in float32 (msa.md section 3 uses fmaf).
# ----------------------------------------------------------------------------------------------------------------
def fma32(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """float32 fma(a, b, c) with a single rounding, computed exactly.

    a*b is exact in float64 (24+24 bits). s = fl64(a*b + c) and its TwoSum error err give the exact sum s + err.
    Rounding s to float32 equals rounding the exact sum unless s is exactly halfway between two float32 values
    and err != 0; then the exact sum lies on err's side of the midpoint.
    """
    a64, b64, c64 = a.to(torch.float64), b.to(torch.float64), c.to(torch.float64)
    p = a64 * b64
    s = p + c64
    bp = s - c64
    err = (p - bp) + (c64 - (s - bp))  # TwoSum: s + err == p + c exactly
    r = s.to(torch.float32)
    r64 = r.to(torch.float64)
    # neighbour of r towards s (the other candidate when s is a midpoint)
    other = torch.nextafter(r, torch.where(s > r64, torch.full_like(r, math.inf), torch.full_like(r, -math.inf)))
    mid = (r64 + other.to(torch.float64)) * 0.5
    at_mid = (s == mid) & (s != r64) & (err != 0)
    # s is a midpoint: RNE picked r (the even one); the exact value is on err's side.
    towards_other = at_mid & (torch.sign(err) == torch.sign(other.to(torch.float64) - r64))
    # s rounded to r but exact is beyond the midpoint away from r? (only possible when s is the midpoint)
    r = torch.where(towards_other, other, r)
    # s exactly equal to r64 cannot be crossed by err (|err| <= ulp64/2 is far below the float32 half-ulp).
    return r


# ----------------------------------------------------------------------------------------------------------------
# NVFP4 blocks (formats.md sections 2-4)
# ----------------------------------------------------------------------------------------------------------------
NVFP4_BLOCK = 16
E4M3_MIN_SCALE = 2.0 ** -9


@dataclass
class NVFP4Tensor:
    codes: torch.Tensor        # uint8 [..., D] E2M1 codes (one per element, unpacked)
    scale_codes: torch.Tensor  # uint8 [..., D/16] E4M3 codes of the block scales
    scales: torch.Tensor       # float [..., D/16] block scale values

    def dequant_exact(self, dtype=torch.float32) -> torch.Tensor:
        """formats.md section 4: e2m1 * scale (exact in float32)."""
        v = e2m1_decode(self.codes, dtype)
        sh = v.shape
        v = v.reshape(*sh[:-1], sh[-1] // NVFP4_BLOCK, NVFP4_BLOCK) * self.scales.to(dtype).unsqueeze(-1)
        return v.reshape(sh)

    def dequant_q8(self, dtype=torch.float32) -> torch.Tensor:
        """formats.md section 4, reference Q8KV4 path: E4M3_satfinite_RN(e2m1 * scale), one rounding."""
        return e4m3(self.dequant_exact(dtype), saturate=True)

    def packed(self) -> torch.Tensor:
        return pack_nibbles(self.codes)


def pack_nibbles(codes: torch.Tensor) -> torch.Tensor:
    """[..., 2n] codes -> [..., n] bytes: element 2i in the low nibble, 2i+1 in the high nibble."""
    c = codes.to(torch.uint8)
    return c[..., 0::2] | (c[..., 1::2] << 4)


def unpack_nibbles(packed: torch.Tensor) -> torch.Tensor:
    p = packed.to(torch.uint8)
    out = torch.stack([p & 0xF, p >> 4], dim=-1)
    return out.reshape(*p.shape[:-1], p.shape[-1] * 2)


def nvfp4_quantize_kv(x: torch.Tensor) -> NVFP4Tensor:
    """Quantise the last dim in 16-value blocks exactly as formats.md section 3 (KV insert; no global scale).

    Arithmetic is in x's dtype (float32 in the reference's FP32 mode): amax / 6 and x / scale are true divisions."""
    assert x.shape[-1] % NVFP4_BLOCK == 0, "NVFP4 needs the last dimension to be a multiple of 16"
    sh = x.shape
    xb = x.reshape(*sh[:-1], sh[-1] // NVFP4_BLOCK, NVFP4_BLOCK)
    amax = torch.clamp(xb.abs().amax(dim=-1), min=1e-12)
    scale = torch.clamp(e4m3(amax / 6.0, saturate=True), min=E4M3_MIN_SCALE, max=448.0)
    y = xb / scale.unsqueeze(-1)
    codes = e2m1_encode(y).reshape(sh)
    return NVFP4Tensor(codes, e4m3_encode(scale), scale)


def nvfp4_fake_quant_kv(x: torch.Tensor, mode: str = "exact") -> torch.Tensor:
    """Quantise-dequantise (no gradient through the rounding; see ste())."""
    q = nvfp4_quantize_kv(x)
    return q.dequant_exact(x.dtype) if mode == "exact" else q.dequant_q8(x.dtype)


def ste(x: torch.Tensor, xq: torch.Tensor) -> torch.Tensor:
    """Straight-through estimator: forward value xq, gradient of identity w.r.t. x."""
    return x + (xq - x).detach()


# --- ModelOpt NVFP4 weights (model.md sections 4 and 7) ----------------------------------------------------------
@dataclass
class NVFP4Weight:
    packed: torch.Tensor        # uint8 [N, K/2]
    scale_codes: torch.Tensor   # uint8 [N, K/16] (F8_E4M3 in the checkpoint)
    scale_2: float              # float32 global scale

    def dequant(self, dtype=torch.float32) -> torch.Tensor:
        return nvfp4_weight_dequant(self.packed, self.scale_codes, self.scale_2, dtype)


def nvfp4_weight_global_scale(amax: float) -> float:
    """ModelOpt's convention weight_scale_2 = amax / (448 * 6), in float32. An all-zero tensor gets 1.0."""
    s = float(torch.tensor(amax, dtype=torch.float32) / torch.tensor(448.0 * 6.0, dtype=torch.float32))
    return s if s > 0 else 1.0


def nvfp4_weight_quantize(w: torch.Tensor, scale_2: float | None = None) -> NVFP4Weight:
    """Quantise W [N, K] to NVFP4 as ModelOpt lays it out (float32 arithmetic):
    block_scale = E4M3((block_amax / 6) / scale_2), values = E2M1(w / (block_scale * scale_2)).
    A block whose scale rounds to 0 stores zeros."""
    w = w.to(torch.float32)
    N, K = w.shape
    assert K % NVFP4_BLOCK == 0
    if scale_2 is None:
        scale_2 = nvfp4_weight_global_scale(float(w.abs().max()))
    s2 = torch.tensor(scale_2, dtype=torch.float32)
    wb = w.reshape(N, K // NVFP4_BLOCK, NVFP4_BLOCK)
    bs = e4m3((wb.abs().amax(-1) / 6.0) / s2, saturate=True)
    denom = (bs * s2).unsqueeze(-1)
    y = torch.where(denom > 0, wb / torch.where(denom > 0, denom, torch.ones_like(denom)), torch.zeros_like(wb))
    codes = e2m1_encode(y).reshape(N, K)
    return NVFP4Weight(pack_nibbles(codes), e4m3_encode(bs), float(s2))


def nvfp4_weight_dequant(packed: torch.Tensor, scale_codes: torch.Tensor, scale_2: float,
                         dtype=torch.float32) -> torch.Tensor:
    """W = (e2m1 * scale) * scale_2, in float32 (the first product is exact)."""
    codes = unpack_nibbles(packed)
    N, K = codes.shape
    v = e2m1_decode(codes, torch.float32).reshape(N, K // NVFP4_BLOCK, NVFP4_BLOCK)
    s = e4m3_decode(scale_codes, torch.float32).unsqueeze(-1)
    w = (v * s) * torch.tensor(scale_2, dtype=torch.float32)
    return w.reshape(N, K).to(dtype)


# --- MXFP8 (OCP MX v1.0; formats.md section 2, model.md section 4) ----------------------------------------------
MX_BLOCK = 32


@dataclass
class MXFP8Tensor:
    codes: torch.Tensor      # uint8 [..., K] E4M3 codes
    exponents: torch.Tensor  # uint8 [..., K/32] UE8M0 (biased exponent e + 127)

    def dequant(self, dtype=torch.float32) -> torch.Tensor:
        return mxfp8_dequant(self.codes, self.exponents, dtype)


def mxfp8_quantize(x: torch.Tensor) -> MXFP8Tensor:
    """OCP rule: shared exponent floor(log2(amax)) - 8 clamped to UE8M0's range [-127, 127], values x / 2^e cast
    to E4M3 with RNE and saturation. An all-zero block gets exponent -127 (stored 0)."""
    sh = x.shape
    assert sh[-1] % MX_BLOCK == 0
    xb = x.to(torch.float64).reshape(*sh[:-1], sh[-1] // MX_BLOCK, MX_BLOCK)
    amax = xb.abs().amax(-1)
    _, ex = torch.frexp(amax)
    e = torch.clamp(ex.to(torch.int64) - 1 - 8, min=-127, max=127)
    e = torch.where(amax > 0, e, torch.full_like(e, -127))
    y = xb * _pow2(-e, xb).unsqueeze(-1)
    codes = e4m3_encode(y, saturate=True).reshape(sh)
    return MXFP8Tensor(codes, (e + 127).to(torch.uint8))


def mxfp8_dequant(codes: torch.Tensor, exponents: torch.Tensor, dtype=torch.float32) -> torch.Tensor:
    sh = codes.shape
    v = e4m3_decode(codes, torch.float64).reshape(*sh[:-1], sh[-1] // MX_BLOCK, MX_BLOCK)
    s = ue8m0_decode(exponents, torch.float64).unsqueeze(-1)
    return (v * s).reshape(sh).to(dtype)


def mxfp8_fake_quant(x: torch.Tensor) -> torch.Tensor:
    return mxfp8_quantize(x).dequant(x.dtype)


# --- M3.1 W4A4 expert activations (model.md section 4) -----------------------------------------------------------
W4A4_FC1_TARGET = 2688.0  # 448 * 6
W4A4_FC2_SCALE = 16.0


def w4a4_fc1_input(x: torch.Tensor):
    """FC1 (w1/w3) input: per row S = 2688 / row_amax, NVFP4 (section 3 quantiser) of x * S.
    Returns (quantised x*S dequantised exactly, per-row factor row_amax / 2688 to multiply the GEMM output by).
    A row of zeros stays zero (factor 0)."""
    row_amax = x.abs().amax(dim=-1, keepdim=True)
    nz = row_amax > 0
    s = torch.where(nz, W4A4_FC1_TARGET / torch.where(nz, row_amax, torch.ones_like(row_amax)),
                    torch.ones_like(row_amax))
    xq = nvfp4_quantize_kv(x * s).dequant_exact(x.dtype)
    return xq, row_amax / W4A4_FC1_TARGET


def w4a4_fc2_input(x: torch.Tensor):
    """FC2 (w2) input: fixed S = 16; returns (quantised x*16, factor 1/16)."""
    return nvfp4_quantize_kv(x * W4A4_FC2_SCALE).dequant_exact(x.dtype), 1.0 / W4A4_FC2_SCALE
