#!/usr/bin/env python3
"""Comparisons of workloads.md section 3, rebuilt from public facts on the GPU in the same run as our benchmarks.

- dense FlashAttention through PyTorch SDPA with a BF16 KV cache (decode: one query per request, GQA 64/4; prefill:
  causal, bottom-right aligned when the chunk has a prefix);
- MSA written with plain PyTorch ops (BF16 index keys and KV): block-max index scores with the causal mask, top-15
  history blocks + the local block per (query, index head), gathered blocks, exact softmax.

Decode: CUDA graph of `calls` steps over rotated inputs (working set > 120 MiB), 3 warm-up + 10 timed replays,
median per step (us). Prefill: one call, not graphed (as the vLLM prefill figures), 1 warm-up + 3 timed calls,
median (ms). Each case is independent: a failure is recorded and the next case runs.
Usage: torch_compare.py OUT.json [decode,prefill]
"""
import json
import math
import sys
import time

import torch
import torch.nn.functional as F

DEV = "cuda"
NQ, NKV, D, BLK, TOPK = 64, 4, 128, 128, 16
G = NQ // NKV


def graph_time_us(fn_for_rot, R, calls=40, warm=3, reps=10):
    """fn_for_rot(r) runs one step on rotation r. Times a CUDA graph of `calls` steps; falls back to eager."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for r in range(min(R, 3)):
            fn_for_rot(r)
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    graphed = True
    try:
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for c in range(calls):
                fn_for_rot(c % R)
        run = g.replay
    except Exception as e:  # noqa: BLE001
        graphed = False
        print("graph capture failed, eager:", repr(e)[:200], file=sys.stderr)

        def run():
            for c in range(calls):
                fn_for_rot(c % R)
    return eager_time_ms(run, warm, reps) * 1000.0 / calls, graphed


def eager_time_ms(fn, warm=1, reps=3):
    """Median over `reps` timed calls of fn (after `warm` untimed ones), milliseconds."""
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        fn()
        e1.record()
        e1.synchronize()
        ts.append(e0.elapsed_time(e1))
    ts.sort()
    return ts[len(ts) // 2]


def sdpa_dense(q, k, v, causal_lower_right=False, is_causal=False):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
        if causal_lower_right:
            from torch.nn.attention.bias import causal_lower_right as clr
            mask = clr(q.shape[2], k.shape[2])
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return F.scaled_dot_product_attention(q, k, v, is_causal=is_causal)


# ---------------------------------------------------------------- plain PyTorch MSA
def msa_decode_torch(q, iq, ik, kc, vc, L):
    """q [B,64,D], iq [B,4,D], ik [B,L,D], kc/vc [B,4,nb,128,D] (BF16). One query per request at position L-1."""
    B = q.shape[0]
    nb = (L + BLK - 1) // BLK
    sc = torch.einsum("bgd,bld->bgl", iq, ik).float()  # [B,4,L]
    blk = sc.view(B, NKV, nb, BLK).amax(-1)  # every history block complete; local block excluded below
    hist = blk[:, :, : nb - 1]
    k = min(TOPK - 1, nb - 1)
    idx = hist.topk(k, dim=-1).indices
    local = torch.full((B, NKV, 1), nb - 1, device=DEV, dtype=idx.dtype)
    sel = torch.cat([idx, local], -1)  # [B,4,k+1]
    bi = torch.arange(B, device=DEV)[:, None, None]
    gi = torch.arange(NKV, device=DEV)[None, :, None]
    kb = kc[bi, gi, sel].reshape(B, NKV, -1, D)  # [B,4,(k+1)*128,D]
    vb = vc[bi, gi, sel].reshape(B, NKV, -1, D)
    qg = q.view(B, NKV, G, D)
    s = torch.matmul(qg, kb.transpose(-1, -2)).float() / math.sqrt(D)
    p = torch.softmax(s, -1).to(q.dtype)
    return torch.matmul(p, vb).reshape(B, NQ, D)


def msa_prefill_torch(q, iq, ik, kc, vc, T, L, chunk=1024):
    """q [T,64,D], iq [T,4,D], ik [L,D], kc/vc [4,nb,128,D]: T new tokens at positions L-T..L-1."""
    nb = (L + BLK - 1) // BLK
    out = torch.empty_like(q)
    keys = torch.arange(nb * BLK, device=DEV)
    ikp = torch.zeros(nb * BLK, D, device=DEV, dtype=ik.dtype)
    ikp[:L] = ik
    for c0 in range(0, T, chunk):
        c1 = min(T, c0 + chunk)
        C = c1 - c0
        pos = torch.arange(L - T + c0, L - T + c1, device=DEV)  # [C]
        local = pos // BLK
        sc = torch.einsum("cgd,ld->gcl", iq[c0:c1], ikp).float()  # [4,C,nb*128]
        sc.masked_fill_(keys[None, None, :] > pos[None, :, None], float("-inf"))
        blk = sc.view(NKV, C, nb, BLK).amax(-1)  # [4,C,nb]
        blk.masked_fill_(torch.arange(nb, device=DEV)[None, None, :] >= local[None, :, None], float("-inf"))
        k = min(TOPK - 1, nb)
        top = blk.topk(k, dim=-1)
        sel = torch.cat([top.indices, local[None, :, None].expand(NKV, C, 1)], -1)  # [4,C,k+1]
        valid = torch.cat([torch.isfinite(top.values), torch.ones(NKV, C, 1, dtype=torch.bool, device=DEV)], -1)
        gi = torch.arange(NKV, device=DEV)[:, None, None]
        kb = kc[gi, sel].reshape(NKV, C, -1, D)  # [4,C,(k+1)*128,D]
        vb = vc[gi, sel].reshape(NKV, C, -1, D)
        qg = q[c0:c1].view(C, NKV, G, D).transpose(0, 1)  # [4,C,16,D]
        s = torch.matmul(qg, kb.transpose(-1, -2)).float() / math.sqrt(D)  # [4,C,16,(k+1)*128]
        kpos = (sel[..., None] * BLK + torch.arange(BLK, device=DEV)).reshape(NKV, C, -1)
        ok = (kpos <= pos[None, :, None]) & valid.repeat_interleave(BLK, -1)
        s.masked_fill_(~ok[:, :, None, :], float("-inf"))
        p = torch.softmax(s, -1).to(q.dtype)
        out[c0:c1] = torch.matmul(p, vb).transpose(0, 1).reshape(C, NQ, D)
    return out


DECODE_CASES = [(1, 8192, 1), (1, 32768, 1), (1, 131072, 1), (8, 32768, 1), (32, 32768, 1), (32, 131072, 1),
                (64, 65536, 1), (8, 524288, 1)]
PREFILL_CASES = [("8K from empty", 8192, 8192), ("32K from empty", 32768, 32768),
                 ("128K in one chunk", 131072, 131072), ("8K chunk on a 32K prefix", 8192, 40960),
                 ("8K chunk on a 120K prefix", 8192, 131072)]


def decode_cases(res):
    bf = torch.bfloat16
    for B, L, ql in DECODE_CASES:
        case = {"batch": B, "L": L, "q_len": ql}
        try:
            set_bytes = B * L * NKV * D * 2 * 2
            R = max(1, min(8, int(2 * 60 * 2**20 / set_bytes) + 1))
            ks = [torch.randn(B, NKV, L, D, device=DEV, dtype=bf) for _ in range(R)]
            vs = [torch.randn(B, NKV, L, D, device=DEV, dtype=bf) for _ in range(R)]
            q = torch.randn(B, NQ, 1, D, device=DEV, dtype=bf)

            def dense(r):
                return F.scaled_dot_product_attention(q, ks[r], vs[r], enable_gqa=True)

            try:
                from torch.nn.attention import SDPBackend, sdpa_kernel
                with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
                    us, graphed = graph_time_us(dense, R)
                case["dense_backend"] = "flash"
            except Exception as e:  # noqa: BLE001
                print("flash GQA decode failed:", repr(e)[:200], file=sys.stderr)
                us, graphed = graph_time_us(dense, R)
                case["dense_backend"] = "default"
            case["dense_sdpa_us"] = round(us, 2)
            case["dense_graphed"] = graphed
            del ks, vs
            torch.cuda.empty_cache()
            # plain PyTorch MSA (BF16 index keys and KV)
            nb = L // BLK
            set_bytes = B * L * (NKV * D * 2 * 2 + D * 2)
            R = max(1, min(8, int(2 * 60 * 2**20 / set_bytes) + 1))
            kcs = [torch.randn(B, NKV, nb, BLK, D, device=DEV, dtype=bf) for _ in range(R)]
            vcs = [torch.randn(B, NKV, nb, BLK, D, device=DEV, dtype=bf) for _ in range(R)]
            iks = [torch.randn(B, L, D, device=DEV, dtype=bf) for _ in range(R)]
            q2 = torch.randn(B, NQ, D, device=DEV, dtype=bf)
            iq = torch.randn(B, NKV, D, device=DEV, dtype=bf)
            us, graphed = graph_time_us(lambda r: msa_decode_torch(q2, iq, iks[r], kcs[r], vcs[r], L), R, calls=20)
            case["torch_msa_us"] = round(us, 2)
            case["torch_msa_graphed"] = graphed
            del kcs, vcs, iks
        except Exception as e:  # noqa: BLE001
            case["error"] = repr(e)[:300]
        torch.cuda.empty_cache()
        print(json.dumps(case), flush=True)
        res["decode"].append(case)


def prefill_cases(res):
    bf = torch.bfloat16
    for name, T, L in PREFILL_CASES:
        case = {"case": name, "q_len": T, "kv_len": L}
        try:
            q = torch.randn(1, NQ, T, D, device=DEV, dtype=bf)
            k = torch.randn(1, NKV, L, D, device=DEV, dtype=bf)
            v = torch.randn(1, NKV, L, D, device=DEV, dtype=bf)
            k64, v64 = k.repeat_interleave(G, 1), v.repeat_interleave(G, 1)
            if T == L:
                fn = lambda: sdpa_dense(q, k64, v64, is_causal=True)  # noqa: E731
            else:
                fn = lambda: sdpa_dense(q, k64, v64, causal_lower_right=True)  # noqa: E731
            case["dense_sdpa_ms"] = round(eager_time_ms(fn), 3)
            case["dense_flops"] = 4.0 * NQ * D * T * (L - T + T / 2)
            case["dense_tflops"] = round(case["dense_flops"] / (case["dense_sdpa_ms"] * 1e-3) / 1e12, 1)
            del q, k, v, k64, v64
            torch.cuda.empty_cache()
            nb = (L + BLK - 1) // BLK
            qq = torch.randn(T, NQ, D, device=DEV, dtype=bf)
            iq = torch.randn(T, NKV, D, device=DEV, dtype=bf)
            ik = torch.randn(L, D, device=DEV, dtype=bf)
            kc = torch.randn(NKV, nb, BLK, D, device=DEV, dtype=bf)
            vc = torch.randn(NKV, nb, BLK, D, device=DEV, dtype=bf)
            reps = 1 if T * L > 2**33 else 3
            case["torch_msa_ms"] = round(eager_time_ms(lambda: msa_prefill_torch(qq, iq, ik, kc, vc, T, L), 1, reps), 2)
            del qq, iq, ik, kc, vc
        except Exception as e:  # noqa: BLE001
            case["error"] = repr(e)[:300]
        torch.cuda.empty_cache()
        print(json.dumps(case), flush=True)
        res["prefill"].append(case)


def main():
    out = sys.argv[1]
    parts = sys.argv[2].split(",") if len(sys.argv) > 2 else ["decode", "prefill"]
    res = {"torch": torch.__version__, "device": torch.cuda.get_device_name(0), "decode": [], "prefill": []}
    t0 = time.time()
    if "decode" in parts:
        decode_cases(res)
        json.dump(res, open(out, "w"), indent=1)
    if "prefill" in parts:
        prefill_cases(res)
    res["wall_s"] = round(time.time() - t0, 1)
    json.dump(res, open(out, "w"), indent=1)


if __name__ == "__main__":
    main()
