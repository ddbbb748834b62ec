"""Number formats against independent expectations: code tables built bit by bit from the format definitions,
brute-force nearest-value rounding with exact rationals, numpy's float16 and struct's float32, hand-worked blocks."""
import functools
import math
import random
import struct
from fractions import Fraction

import numpy as np
import pytest
import torch

from msaref import formats as fm


# ------------------------------------------------------------------------------------------------ oracles
def fp32(x: float) -> float:
    """Round a Python float (double) to float32, RNE (struct does IEEE conversion)."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


@functools.lru_cache(maxsize=None)
def table_values(fmt):
    """Sorted non-negative finite values of an 8/4-bit format, from the bit layout (independent of formats.py)."""
    if fmt == "e4m3":
        e_bits, m_bits, bias, special = 4, 3, 7, "fn"
    elif fmt == "e5m2":
        e_bits, m_bits, bias, special = 5, 2, 15, "ieee"
    else:
        e_bits, m_bits, bias, special = 2, 1, 1, "none"
    vals = []
    for code in range(1 << (e_bits + m_bits)):
        e, m = code >> m_bits, code & ((1 << m_bits) - 1)
        if special == "fn" and e == (1 << e_bits) - 1 and m == (1 << m_bits) - 1:
            continue
        if special == "ieee" and e == (1 << e_bits) - 1:
            continue
        if e == 0:
            v = Fraction(m, 1 << m_bits) * Fraction(2) ** (1 - bias)
        else:
            v = (1 + Fraction(m, 1 << m_bits)) * Fraction(2) ** (e - bias)
        vals.append((v, code))
    return vals


def nearest(x: float, fmt: str, saturate: bool):
    """Nearest representable value, ties to the even code. Saturating: |x| is clamped to the largest value first.
    Otherwise the value one step past the largest (2^(emax+1), the next code) stands for overflow: inf for E5M2,
    NaN for E4M3 (which has no inf). E2M1 always saturates."""
    if math.isnan(x):
        return math.nan
    vals = table_values(fmt)
    top, top_code = vals[-1]
    sat = saturate or fmt == "e2m1"
    if math.isinf(x):
        return math.copysign(float(top), x) if sat else (x if fmt == "e5m2" else math.nan)
    a = Fraction(abs(x))
    if sat:
        a = min(a, top)
    else:
        vals = vals + [(top + (top - vals[-2][0]), top_code + 1)]
    best = min(vals, key=lambda vc: (abs(vc[0] - a), vc[1] % 2))
    if best[1] > top_code:
        return math.copysign(math.inf, x) if fmt == "e5m2" else math.nan
    return math.copysign(float(best[0]), x)


def grid(fmt):
    """All values, all midpoints, points just around the midpoints, zero, negatives, overflow points."""
    vals = [float(v) for v, _ in table_values(fmt)]
    pts = set(vals)
    for a, b in zip(vals[:-1], vals[1:]):
        m = (a + b) / 2
        pts.update([m, np.nextafter(m, 0.0), np.nextafter(m, math.inf), a + (b - a) / 4])
    top, step = vals[-1], vals[-1] - vals[-2]
    pts.update([top + step / 2, np.nextafter(top + step / 2, 0.0), np.nextafter(top + step / 2, math.inf),
                top * 4, 1e-30, 5e-324])
    pts = sorted(pts)
    return [float(p) for p in pts] + [-float(p) for p in pts]


# ------------------------------------------------------------------------------------------------ scalar formats
@pytest.mark.parametrize("fmt,fn", [("e4m3", fm.e4m3), ("e5m2", fm.e5m2)])
@pytest.mark.parametrize("saturate", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_8bit_rounding_matches_brute_force(fmt, fn, saturate, dtype):
    xs = grid(fmt)
    xs_c = [x for x in xs if dtype == torch.float64 or fp32(x) == x]
    got = fn(torch.tensor(xs_c, dtype=dtype), saturate=saturate).tolist()
    for x, g in zip(xs_c, got):
        want = nearest(x, fmt, saturate)
        assert (math.isnan(want) and math.isnan(g)) or (g == want and math.copysign(1, g) == math.copysign(1, want)), \
            (fmt, saturate, x, g, want)


def test_special_values():
    inf, nan = math.inf, math.nan
    x = torch.tensor([inf, -inf, nan, 464.0, 464.0001, -0.0])
    assert fm.e4m3(x, True).tolist()[:2] == [448.0, -448.0]
    assert math.isnan(fm.e4m3(x, True)[2])
    assert fm.e4m3(x, True)[3] == 448 and fm.e4m3(x, True)[4] == 448
    assert all(math.isnan(v) for v in fm.e4m3(x, False).tolist()[:3]) and math.isnan(fm.e4m3(x, False)[4])
    assert fm.e4m3(x, False)[3] == 448  # 464 is the tie between 448 (even) and 480: stays 448
    assert fm.e5m2(torch.tensor([inf, 61440.0, 61439.0]), False).tolist() == [inf, inf, 57344.0]
    assert fm.e5m2(torch.tensor([inf, 61440.0]), True).tolist() == [57344.0, 57344.0]
    assert math.copysign(1, float(fm.e4m3(x)[5])) == -1  # -0 stays -0 in E4M3 (code 0x80)


def test_e4m3_and_e5m2_code_tables_exhaustive():
    codes = torch.arange(256, dtype=torch.uint8)
    for name, dec, enc, ebits, mbits, bias in (("e4m3", fm.e4m3_decode, fm.e4m3_encode, 4, 3, 7),
                                               ("e5m2", fm.e5m2_decode, fm.e5m2_encode, 5, 2, 15)):
        v = dec(codes, torch.float64).tolist()
        for c in range(256):
            s, e, m = c >> 7, (c >> mbits) & ((1 << ebits) - 1), c & ((1 << mbits) - 1)
            if name == "e4m3" and e == 15 and m == 7:
                assert math.isnan(v[c])
                continue
            if name == "e5m2" and e == 31:
                assert (math.isinf(v[c]) and m == 0) or (math.isnan(v[c]) and m != 0)
                continue
            mag = (m / (1 << mbits)) * 2.0 ** (1 - bias) if e == 0 else (1 + m / (1 << mbits)) * 2.0 ** (e - bias)
            assert v[c] == (-mag if s else mag), (name, c)
        finite = [c for c in range(256) if math.isfinite(v[c]) or (name == "e5m2" and math.isinf(v[c]))]
        back = enc(torch.tensor([v[c] for c in finite], dtype=torch.float64), **({"saturate": False} if name == "e5m2"
                                                                                  else {})).tolist()
        assert back == finite
    assert fm.e4m3_decode(torch.tensor([0x7E], dtype=torch.uint8)).item() == 448.0
    assert fm.e4m3_decode(torch.tensor([0x01], dtype=torch.uint8)).item() == 2.0 ** -9
    assert fm.e4m3_encode(torch.tensor([math.nan])).item() == 0x7F


def test_e2m1_exhaustive():
    codes = torch.arange(16, dtype=torch.uint8)
    assert fm.e2m1_decode(codes).tolist() == [0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6]
    xs = grid("e2m1") + [7.0, -100.0, 5.0, 2.5, 0.25, -0.25, -1e-9]
    got = fm.e2m1_decode(fm.e2m1_encode(torch.tensor(xs, dtype=torch.float64)), torch.float64).tolist()
    for x, g in zip(xs, got):
        assert g == nearest(x, "e2m1", True), (x, g)
    # -0 and values that round to zero are stored as +0 (code 0)
    assert fm.e2m1_encode(torch.tensor([-0.0, -0.25, -0.1])).tolist() == [0, 0, 0]
    # the ladder of formats.md section 3 and the generic RNE agree on a fine grid
    y = torch.linspace(-8, 8, 64001, dtype=torch.float64)
    ladder = fm.e2m1_decode(fm.e2m1_encode(y), torch.float64)
    generic = fm.round_to_format(y, fm.E2M1, True)
    assert torch.equal(ladder, generic + 0.0)  # + 0.0 turns -0 into +0


def test_ue8m0_exhaustive():
    v = fm.ue8m0_decode(torch.arange(256, dtype=torch.uint8), torch.float64).tolist()
    for c in range(255):
        assert v[c] == math.ldexp(1.0, c - 127)
    assert math.isnan(v[255])
    assert fm.ue8m0_decode(torch.tensor([0], dtype=torch.uint8), torch.float32).item() == math.ldexp(1.0, -127)


def test_bf16_exhaustive_and_rne():
    bits = np.arange(65536, dtype=np.uint32).astype(np.uint16)
    f = fm.bf16_bits_to_float(bits).numpy()
    want = (bits.astype(np.uint32) << 16).view(np.float32)
    assert np.array_equal(f.view(np.uint32), want.view(np.uint32))
    # RNE narrowing: all finite bf16 values, their midpoints and neighbours of midpoints
    fin = want[np.isfinite(want) & (want >= 0)]
    fin = np.unique(fin)
    mids = ((fin[:-1].astype(np.float64) + fin[1:]) / 2).astype(np.float32)
    xs = np.concatenate([fin, mids, np.nextafter(mids, np.float32(0)), np.nextafter(mids, np.float32(np.inf))])
    xs = np.concatenate([xs, -xs])
    t = torch.from_numpy(xs)
    got = fm.float_to_bf16_bits(t)
    ref = fm.round_to_format(t, fm.BF16, False)
    assert np.array_equal(fm.bf16_bits_to_float(got).numpy().view(np.uint32), ref.numpy().view(np.uint32))
    # explicit: RNE on the bit pattern
    u = xs.view(np.uint32).astype(np.uint64)
    rne = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    finite = np.isfinite(xs)
    assert np.array_equal(got[finite], rne[finite])


def test_fp16_exhaustive():
    bits = np.arange(65536, dtype=np.uint32).astype(np.uint16)
    h = bits.view(np.float16)
    t = torch.from_numpy(h.astype(np.float32))
    r = fm.round_to_format(t, fm.FP16, False).numpy()
    same = np.isnan(h) | (r == h.astype(np.float32))
    assert same.all()
    xs = np.random.default_rng(1).standard_normal(200000).astype(np.float32) * np.float32(3000)
    assert np.array_equal(fm.round_to_format(torch.from_numpy(xs), fm.FP16, False).numpy(),
                          xs.astype(np.float16).astype(np.float32))


def test_fma32_exact():
    rnd = random.Random(5)
    a, b, c = [], [], []
    for _ in range(20000):
        x = fp32(rnd.uniform(-10, 10) * 2 ** rnd.randint(-20, 20))
        y = fp32(rnd.uniform(-10, 10))
        a.append(x)
        b.append(y)
        c.append(fp32(-x * y * (1 + rnd.choice([0, 2 ** -24, -2 ** -24, 2 ** -30])) + rnd.choice([0, 1e-9, 1.5])))
    # midpoint-adversarial cases: a*b = 1 + 2^-24 + tiny, c = 0 etc.
    for k in range(1, 40):
        x = fp32(1 + 2 ** -12)
        a.append(x)
        b.append(x)
        c.append(fp32(-(2 ** -k)))
    got = fm.fma32(torch.tensor(a), torch.tensor(b), torch.tensor(c)).tolist()
    for x, y, z, g in zip(a, b, c, got):
        exact = Fraction(x) * Fraction(y) + Fraction(z)
        want = nearest_fp32(exact)
        assert g == want, (x, y, z, g, want)


def nearest_fp32(q: Fraction) -> float:
    """Correctly rounded float32 of an exact rational (RNE)."""
    f = float(q)  # correctly rounded double
    lo = fp32(f)
    if Fraction(lo) == q:
        return lo
    up = float(np.nextafter(np.float32(lo), np.float32(math.inf if q > Fraction(lo) else -math.inf)))
    dl, du = abs(Fraction(lo) - q), abs(Fraction(up) - q)
    if dl != du:
        return lo if dl < du else up
    return lo if (np.float32(lo).view(np.uint32) & 1) == 0 else up


# ------------------------------------------------------------------------------------------------ NVFP4 / MXFP8
def nvfp4_block_oracle(xs):
    """formats.md section 3 for one block, element by element in Python (float32 arithmetic emulated)."""
    amax = max(max(abs(x) for x in xs), 1e-12)
    s = nearest(fp32(fp32(amax) / 6.0), "e4m3", True)
    s = min(max(s, 2.0 ** -9), 448.0)
    codes = []
    for x in xs:
        y = fp32(x / s)
        a = abs(y)
        mag = (7 if a > 5 else 6 if a >= 3.5 else 5 if a > 2.5 else 4 if a >= 1.75 else 3 if a > 1.25 else
               2 if a >= 0.75 else 1 if a > 0.25 else 0)
        codes.append(mag | (8 if (y < 0 and mag) else 0))
    return s, codes


def test_nvfp4_kv_quantiser_against_scalar_oracle():
    rng = np.random.default_rng(3)
    blocks = [rng.standard_normal(16).astype(np.float32) * np.float32(10.0 ** rng.uniform(-6, 4))
              for _ in range(400)]
    blocks.append(np.zeros(16, np.float32))
    blocks.append(np.full(16, -0.0, np.float32))
    blocks.append(np.array([1e-30] * 16, np.float32))            # amax floor and scale clamp 2^-9
    blocks.append(np.array([6000.0] + [1.0] * 15, np.float32))    # scale saturates at 448 -> E2M1 saturates
    # values exactly on the ladder thresholds for scale 1 (amax 6 -> amax/6 = 1)
    blocks.append(np.array([6, 0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5, -0.25, -0.75, -1.25, -1.75, -2.5, -3.5, -5, 0],
                           np.float32))
    x = torch.from_numpy(np.stack(blocks))
    q = fm.nvfp4_quantize_kv(x)
    for i, b in enumerate(blocks):
        s, codes = nvfp4_block_oracle([float(v) for v in b])
        assert q.scales[i, 0].item() == s, i
        assert q.codes[i].tolist() == codes, (i, b)
    assert q.codes[-1].tolist() == [7, 0, 2, 2, 4, 4, 6, 6, 0, 10, 10, 12, 12, 14, 14, 0]
    # dequantisation: exact product, and the Q8KV4 path rounds it once to E4M3
    ex = q.dequant_exact()
    manual = fm.e2m1_decode(q.codes) * q.scales
    assert torch.equal(ex, manual)
    assert torch.equal(q.dequant_q8(), fm.e4m3(manual))
    assert torch.equal(fm.e4m3_decode(q.scale_codes), q.scales)


def test_nvfp4_packing_order():
    codes = torch.tensor([[1, 2, 3, 4, 15, 0]], dtype=torch.uint8)
    p = fm.pack_nibbles(codes)
    assert p.tolist() == [[0x21, 0x43, 0x0F]]
    assert torch.equal(fm.unpack_nibbles(p), codes)


def test_nvfp4_weight_modelopt():
    rng = np.random.default_rng(4)
    w = torch.from_numpy(rng.standard_normal((8, 64)).astype(np.float32))
    q = fm.nvfp4_weight_quantize(w)
    amax = float(w.abs().max())
    assert q.scale_2 == fp32(fp32(amax) / 2688.0)
    deq = q.dequant()
    codes = fm.unpack_nibbles(q.packed)
    sc = fm.e4m3_decode(q.scale_codes)
    for r in range(8):
        for c in range(64):
            want = fp32(fp32(float(fm.e2m1_decode(codes[r, c:c + 1])[0]) * float(sc[r, c // 16])) * q.scale_2)
            assert deq[r, c].item() == want
    # each value lies within half an E2M1 step of the block's grid (relative to the block scale)
    err = (deq - w).abs().reshape(8, 4, 16)
    step = (sc * q.scale_2).unsqueeze(-1)
    assert bool((err <= step * 1.0 + 1e-7).all())
    # the block with the global amax uses scale 448 (amax / 6 / (amax / 2688) = 448)
    assert float(sc.max()) == 448.0


def test_mxfp8_ocp_rule():
    x = torch.zeros(4, 64, dtype=torch.float32)
    x[0, :32] = 1.0            # amax 1 -> e = -8, values 256
    x[0, 32:] = 500.0          # amax 500 -> floor(log2 500) = 8 -> e = 0, values 500 -> 448 saturated? 500 > 448
    x[1, :32] = torch.linspace(-3, 3, 32)
    x[2, 5] = 2.0 ** -140      # tiny: exponent clamps at -127
    q = fm.mxfp8_quantize(x)
    e = q.exponents.to(torch.int64) - 127
    assert e[0].tolist() == [-8, 0]
    assert fm.e4m3_decode(q.codes[0, :1]).item() == 256.0
    assert fm.e4m3_decode(q.codes[0, 32:33]).item() == 448.0
    assert e[1, 0].item() == 1 - 8 and e[2, 0].item() == -127 and e[3, 0].item() == -127  # zero block -> -127
    d = q.dequant()
    assert torch.allclose(d[1, :32], x[1, :32], rtol=2 ** -4)
    assert torch.equal(d, fm.e4m3_decode(q.codes) * fm.ue8m0_decode(q.exponents).repeat_interleave(32, -1))


def test_w4a4_activation_quantisation():
    rng = np.random.default_rng(6)
    x = torch.from_numpy(rng.standard_normal((5, 64)).astype(np.float32))
    x[3] = 0.0
    xq, f = fm.w4a4_fc1_input(x)
    amax = x.abs().amax(-1, keepdim=True)
    assert torch.equal(f, amax / 2688.0)
    s = 2688.0 / amax[0]
    assert torch.equal(xq[0], fm.nvfp4_quantize_kv(x[0] * s).dequant_exact())
    assert bool((xq[3] == 0).all()) and f[3].item() == 0
    assert float(xq.abs().max()) <= 2688.0
    hq, f2 = fm.w4a4_fc2_input(x)
    assert f2 == 1 / 16 and torch.equal(hq, fm.nvfp4_quantize_kv(x * 16).dequant_exact())
