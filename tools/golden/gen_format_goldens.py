#!/usr/bin/env python3
"""Golden vectors for the number formats of formats.md, produced by independent implementations:
PyTorch's float8 dtypes (torch >= 2.1) and ml_dtypes (float4_e2m1fn, float8_e8m0fnu).

Run where those packages exist (the lent GPU machine has torch 2.11 + ml_dtypes; Debian's torch 1.13 has no float8):
    python3 tools/golden/gen_format_goldens.py OUTDIR
Writes the text files described in tests/formats/data/README.md (one file per check, '#' comments, hex fields).
Only CPU tensor casts are used. The C++ tests read the files; nothing here is C++-derived.
"""
import os
import struct
import sys

import ml_dtypes
import numpy as np
import torch

rng = np.random.default_rng(20261129)


def f32_bits(values):
    return np.asarray(values, dtype=np.float32).view(np.uint32)


def hex8(u):
    return f"{int(u):08x}"


def write(path, header, lines):
    with open(path, "w") as f:
        for h in header:
            f.write(f"# {h}\n")
        f.write(f"# generator: tools/golden/gen_format_goldens.py, torch {torch.__version__}, "
                f"ml_dtypes {ml_dtypes.__version__}, numpy {np.__version__}\n")
        for line in lines:
            f.write(line + "\n")


def decode_table_torch(dtype):
    codes = torch.arange(256, dtype=torch.uint8)
    return codes.view(dtype).to(torch.float32).numpy()


def representable_sorted(table):
    vals = np.unique(table[np.isfinite(table)].astype(np.float64))
    return vals


def probe_inputs(table, max_finite, n_random=8000):
    """Every representable value, every midpoint between neighbours and its float32 neighbours, overflow,
    underflow and special values, plus log-uniform random values."""
    vals = representable_sorted(table)
    pts = list(vals)
    mids = (vals[:-1] + vals[1:]) / 2.0
    for m in mids:
        m32 = np.float32(m)
        pts += [m32, np.nextafter(m32, np.float32(np.inf)), np.nextafter(m32, np.float32(-np.inf))]
    top = np.float32(max_finite)
    pts += [top * 1.01, top * 1.5, top * 2, top * 1e10, 3.0e38, np.float32(np.inf), np.float32(-np.inf)]
    pos = vals[vals > 0]
    smallest = pos.min()
    pts += [smallest / 2, smallest / 4, np.nextafter(np.float32(smallest / 2), np.float32(1)),
            np.nextafter(np.float32(smallest / 2), np.float32(0)), 1e-30, 1e-45, 0.0, -0.0]
    mags = np.exp(rng.uniform(np.log(float(smallest) / 8), np.log(float(max_finite) * 4), n_random))
    signs = rng.choice([-1.0, 1.0], n_random)
    pts += list(mags * signs)
    pts = np.array(pts, dtype=np.float64)
    pts = np.concatenate([pts, -pts])
    arr = pts.astype(np.float32)
    arr = np.concatenate([arr, np.array([np.nan, -np.nan], dtype=np.float32)])
    # unique by bit pattern, deterministic order
    _, idx = np.unique(arr.view(np.uint32), return_index=True)
    return arr[np.sort(idx)]


def torch_cast_codes(x, dtype, saturate_to=None):
    t = torch.from_numpy(x.copy())
    if saturate_to is not None:
        t = torch.where(torch.isnan(t), t, t.clamp(-saturate_to, saturate_to))
    return t.to(dtype).view(torch.uint8).numpy()


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "tests/formats/data"
    os.makedirs(out, exist_ok=True)

    # ---- decode tables
    e4m3 = decode_table_torch(torch.float8_e4m3fn)
    e5m2 = decode_table_torch(torch.float8_e5m2)
    ue8m0 = np.arange(256, dtype=np.uint8).view(ml_dtypes.float8_e8m0fnu).astype(np.float32)
    e2m1 = np.arange(16, dtype=np.uint8).view(ml_dtypes.float4_e2m1fn).astype(np.float32)
    for name, table, src in [("e4m3", e4m3, "torch.float8_e4m3fn"), ("e5m2", e5m2, "torch.float8_e5m2"),
                             ("ue8m0", ue8m0, "ml_dtypes.float8_e8m0fnu")]:
        write(f"{out}/decode_{name}.txt", [f"decode of every code by {src}: code f32bits"],
              [f"{c:02x} {hex8(b)}" for c, b in enumerate(f32_bits(table))])
    write(f"{out}/decode_e2m1.txt", ["decode of every code by ml_dtypes.float4_e2m1fn: code f32bits"],
          [f"{c:x} {hex8(b)}" for c, b in enumerate(f32_bits(e2m1))])

    # ---- encode: E4M3 / E5M2 (torch casts; 'sat' = clamp to +-max finite first, NaN kept)
    for name, dtype, table, maxv in [("e4m3", torch.float8_e4m3fn, e4m3, 448.0),
                                     ("e5m2", torch.float8_e5m2, e5m2, 57344.0)]:
        x = probe_inputs(table, maxv)
        ieee = torch_cast_codes(x, dtype)
        sat = torch_cast_codes(x, dtype, saturate_to=maxv)
        xb = f32_bits(x)
        write(f"{out}/encode_{name}_ieee.txt",
              [f"float32 -> {name} by torch .to({dtype}) (round to nearest even; overflow as torch does): "
               "input_f32bits code"], [f"{hex8(b)} {c:02x}" for b, c in zip(xb, ieee)])
        write(f"{out}/encode_{name}_sat.txt",
              [f"float32 -> {name}, saturating: clamp(x, -{maxv}, {maxv}) then torch .to({dtype}); NaN stays NaN: "
               "input_f32bits code"], [f"{hex8(b)} {c:02x}" for b, c in zip(xb, sat)])

    # ---- encode: E2M1 (ml_dtypes; finite inputs only; negative zero results normalised to code 0 per formats.md 3.4)
    x = probe_inputs(e2m1, 6.0)
    x = x[np.isfinite(x)]
    codes = x.astype(ml_dtypes.float4_e2m1fn).view(np.uint8) & 0xF
    codes = np.where(codes == 8, 0, codes)
    write(f"{out}/encode_e2m1.txt",
          ["float32 -> e2m1 by ml_dtypes.float4_e2m1fn cast (RNE, saturating at +-6); finite inputs only; "
           "a negative-zero result (code 8) is written as code 0 (formats.md section 3 step 4): input_f32bits code"],
          [f"{hex8(b)} {c:x}" for b, c in zip(f32_bits(x), codes)])

    # ---- encode: BF16 and FP16 (torch)
    n = 40000
    bits = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    # dense coverage of rounding boundaries: low 16 bits near 0x8000
    boundary = (rng.integers(0, 2**16, 20000, dtype=np.uint64).astype(np.uint32) << 16) | \
        rng.choice(np.array([0x7FFF, 0x8000, 0x8001, 0x0000, 0xFFFF, 0x18000 & 0xFFFF], dtype=np.uint32), 20000)
    special = np.array([0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0x7F7FFFFF, 0x7F7F8000, 0x7F7F7FFF,
                        0x00000001, 0x00008000, 0x007FFFFF, 0x3F808000, 0x3F818000], dtype=np.uint32)
    allbits = np.concatenate([special, boundary, bits])
    xf = allbits.view(np.float32)
    bf = torch.from_numpy(xf.copy()).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
    write(f"{out}/encode_bf16.txt", ["float32 -> bf16 by torch .to(torch.bfloat16): input_f32bits bf16bits"],
          [f"{hex8(b)} {h:04x}" for b, h in zip(allbits, bf)])
    # fp16: concentrate on the half range
    mags = np.exp(rng.uniform(np.log(2.0**-26), np.log(1.0e5), 30000)) * rng.choice([-1.0, 1.0], 30000)
    halfvals = np.arange(65536, dtype=np.uint16).view(np.float16).astype(np.float64)
    fin = np.unique(halfvals[np.isfinite(halfvals)])
    mids = ((fin[:-1] + fin[1:]) / 2).astype(np.float32)
    xf16 = np.concatenate([special.view(np.float32), mids, np.nextafter(mids, np.float32(np.inf)),
                           mags.astype(np.float32), np.float32([65504, 65519.99, 65520, 65536, 1e6])])
    hf = torch.from_numpy(xf16.copy()).to(torch.float16).view(torch.int16).numpy().view(np.uint16)
    write(f"{out}/encode_fp16_ieee.txt",
          ["float32 -> fp16 by torch .to(torch.float16) (IEEE, overflow to inf): input_f32bits fp16bits"],
          [f"{hex8(b)} {h:04x}" for b, h in zip(f32_bits(xf16), hf)])

    # ---- NVFP4 KV-insert quantiser (formats.md section 3), written here with torch/ml_dtypes casts
    blocks = []
    for i in range(3000):
        kind = i % 6
        scale = float(np.exp(rng.uniform(np.log(1e-5), np.log(3e3))))
        if kind == 0:
            b = rng.normal(0, 1, 16) * scale
        elif kind == 1:
            b = rng.standard_t(2, 16) * scale
        elif kind == 2:  # values exactly on E2M1 ladder thresholds times a representable scale
            s = float(e4m3[rng.integers(8, 120)])
            thr = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 6.0, 0.0])
            b = rng.choice(thr, 16) * s * rng.choice([-1.0, 1.0], 16)
            b[0] = 6.0 * s  # amax / 6 == s exactly
        elif kind == 3:
            b = np.zeros(16)
            b[rng.integers(0, 16)] = scale * rng.choice([-1.0, 1.0])
        elif kind == 4:
            b = rng.uniform(-1, 1, 16) * float(np.exp(rng.uniform(np.log(1e-9), np.log(1e-3))))
        else:
            b = rng.normal(0, 1, 16) * scale
            b[rng.integers(0, 16)] *= 50
        blocks.append(b.astype(np.float32))
    blocks.append(np.zeros(16, np.float32))
    blocks.append(np.full(16, -0.0, np.float32))
    blocks.append(np.full(16, 1e30, np.float32))
    X = np.stack(blocks)
    amax = np.maximum(np.abs(X).max(axis=1), np.float32(1e-12)).astype(np.float32)
    s_in = torch.from_numpy((amax / np.float32(6.0)).astype(np.float32))
    s_in = s_in.clamp(2.0**-9, 448.0)  # E4M3_RN(amax/6) clamped to [2^-9, 448] (clamping first is equivalent)
    s_code = s_in.to(torch.float8_e4m3fn)
    s_val = s_code.to(torch.float32).clamp(min=2.0**-9).numpy()
    s_code = torch.from_numpy(s_val).to(torch.float8_e4m3fn).view(torch.uint8).numpy()
    Y = (X / s_val[:, None]).astype(np.float32)  # true FP32 division
    q = Y.astype(ml_dtypes.float4_e2m1fn).view(np.uint8) & 0xF
    q = np.where(q == 8, 0, q).astype(np.uint8)
    lines = []
    for r in range(X.shape[0]):
        packed = bytes(int(q[r, 2 * i]) | (int(q[r, 2 * i + 1]) << 4) for i in range(8))
        lines.append(" ".join(hex8(b) for b in f32_bits(X[r])) + f" {packed.hex()} {int(s_code[r]):02x}")
    write(f"{out}/nvfp4_quantize.txt",
          ["NVFP4 KV-insert quantiser, formats.md section 3: scale = E4M3_RN(max(amax,1e-12)/6) clamped to [2^-9,448] "
           "(torch float8_e4m3fn cast), codes = E2M1_RN(x / scale) (FP32 division, ml_dtypes float4_e2m1fn, -0 -> 0)",
           "16 input f32bits, packed bytes (element 2i low nibble; byte 0 first) as hex, scale code"], lines)

    # ---- MXFP8 OCP quantiser (formats.md section 2)
    mblocks = []
    for i in range(2000):
        scale = float(np.exp(rng.uniform(np.log(1e-30), np.log(1e30)))) if i % 4 == 0 else \
            float(np.exp(rng.uniform(np.log(1e-4), np.log(1e4))))
        b = rng.normal(0, 1, 32) * scale
        if i % 7 == 0:
            b[rng.integers(0, 32)] = 2.0 ** int(rng.integers(-20, 20))  # exact powers of two as amax
        mblocks.append(b.astype(np.float32))
    mblocks.append(np.zeros(32, np.float32))
    M = np.stack(mblocks)
    lines = []
    for r in range(M.shape[0]):
        x = M[r]
        amax = float(np.abs(x).max())
        if amax == 0.0:
            e = -127
        else:
            _, E = np.frexp(np.float32(amax))  # amax = m * 2^E, m in [0.5, 1)
            e = int(E) - 1 - 8
            e = max(-127, min(127, e))
        scaled = torch.ldexp(torch.from_numpy(x.copy()), torch.tensor(float(-e)))
        codes = scaled.clamp(-448.0, 448.0).to(torch.float8_e4m3fn).view(torch.uint8).numpy()
        lines.append(" ".join(hex8(b) for b in f32_bits(x)) + " " + bytes(codes.tolist()).hex() + f" {e + 127:02x}")
    write(f"{out}/mxfp8_quantize.txt",
          ["MXFP8 OCP MX v1.0 quantiser: e = floor(log2(amax)) - 8 clamped to [-127,127] (all-zero block: code 0), "
           "values = E4M3_RN_sat(x * 2^-e) by torch float8_e4m3fn",
           "32 input f32bits, 32 E4M3 codes as hex, UE8M0 scale code"], lines)
    for f in sorted(os.listdir(out)):
        print(f, sum(1 for l in open(os.path.join(out, f)) if not l.startswith("#")))


if __name__ == "__main__":
    main()
