#!/usr/bin/env python3
"""Summarise msa_cuda_decode_bench output: a table against the vLLM Triton figures of workloads.md section 3.

Usage: summarize.py BENCH_JSON [--results OUT.json --commit HASH --date D --machine M] [--plot OUT.png] [--svg OUT.svg]
(--plot needs matplotlib; --svg writes the same two panels with plain Python.)
"""
import argparse
import json
import math

# vLLM Triton BF16-KV MSA decode on the same H200 (workloads.md section 3), microseconds per layer-step.
VLLM = {("lowlat", 1, 8192, 1): 15.2, ("lowlat", 1, 32768, 1): 17.3,
        ("vllm_cmp_q1", 1, 8192, 1): 15.2, ("vllm_cmp_q1", 1, 131072, 1): 25.2, ("vllm_cmp_q1", 8, 32768, 1): 42.9,
        ("vllm_cmp_q1", 32, 32768, 1): 110.1, ("vllm_cmp_q1", 32, 131072, 1): 304.4,
        ("vllm_cmp_q1", 64, 65536, 1): 336.4, ("vllm_cmp_q1", 8, 524288, 1): 335.3,
        ("vllm_cmp_q8", 32, 32768, 8): 351.9, ("vllm_cmp_q8", 32, 131072, 8): 627.8}


def load(path):
    text = open(path).read()
    try:
        return json.loads(text)
    except json.JSONDecodeError:  # a run cut short: keep the complete case lines
        cases = []
        for line in text.splitlines():
            line = line.strip().lstrip(",")
            if line.startswith('{"suite"'):
                cases.append(json.loads(line))
        head = text.split("\n", 1)[0]
        bw = json.loads(head.split(',"cases"')[0] + "}")["copy_bw_TBs"] if "copy_bw_TBs" in head else None
        return {"copy_bw_TBs": bw, "cases": cases, "truncated": True}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bench")
    ap.add_argument("--results")
    ap.add_argument("--commit", default="")
    ap.add_argument("--date", default="")
    ap.add_argument("--machine", default="NVIDIA H200")
    ap.add_argument("--plot")
    ap.add_argument("--svg")
    a = ap.parse_args()
    d = load(a.bench)
    print(f"copy bandwidth {d.get('copy_bw_TBs')} TB/s")
    print(f"{'suite':12s} {'B':>4s} {'L':>7s} {'q':>2s} {'us':>9s} {'floor':>7s} {'%copy':>6s} {'vLLM':>7s} {'x':>5s}")
    for c in d["cases"]:
        v = VLLM.get((c["suite"], c["batch"], c["L"], c["q_len"]))
        if v:
            c["vllm_triton_bf16_us"] = v
            c["speedup_vs_vllm"] = round(v / c["us"], 3)
        print(f"{c['suite']:12s} {c['batch']:4d} {c['L']:7d} {c['q_len']:2d} {c['us']:9.2f} {c['floor_us']:7.2f} "
              f"{100 * c['frac_copy_bw']:6.1f} {v if v else '':>7} {c.get('speedup_vs_vllm', ''):>5}")
    if a.results:
        out = {"figure": "MSA decode, CUDA sm_90a tensor-core kernels (exact NVFP4 dequantisation), one layer, "
                         "us per call in a 120-call CUDA graph (median of 20 replays)",
               "date": a.date, "machine": a.machine, "commit": a.commit, **d}
        json.dump(out, open(a.results, "w"), indent=1)
    if a.svg:
        svg_plot(d, a.svg)
    if a.plot:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(1, 2, figsize=(13, 4.5))
        for B in (8, 32, 64, 128):
            cs = [c for c in d["cases"] if c["suite"] == "decode_q8" and c["batch"] == B]
            if cs:
                ax[0].plot([c["L"] / 1024 for c in cs], [100 * c["frac_copy_bw"] for c in cs], "o-", label=f"batch {B}")
        ax[0].set_xscale("log")
        ax[0].set_xlabel("context (K tokens)")
        ax[0].set_ylabel("% of copy bandwidth over the NVFP4 byte floor")
        ax[0].set_title("decode suite, 8 queries per request")
        ax[0].legend()
        cmp = [c for c in d["cases"] if "vllm_triton_bf16_us" in c and c["suite"] != "lowlat"]
        labels = [f"{c['batch']}x{c['L'] // 1024}K" + (" q8" if c["q_len"] == 8 else "") for c in cmp]
        x = range(len(cmp))
        ax[1].bar([i - 0.2 for i in x], [c["vllm_triton_bf16_us"] for c in cmp], 0.4, label="vLLM Triton (BF16 KV)")
        ax[1].bar([i + 0.2 for i in x], [c["us"] for c in cmp], 0.4, label="ours (NVFP4 KV)")
        ax[1].set_xticks(list(x))
        ax[1].set_xticklabels(labels, rotation=30)
        ax[1].set_ylabel("us per layer decode step")
        ax[1].set_yscale("log")
        ax[1].legend()
        fig.tight_layout()
        fig.savefig(a.plot, dpi=110)


def svg_plot(d, path):
    """Left: us per call, ours vs vLLM (log scale). Right: % of copy bandwidth over the floor, decode suite."""
    W, H, PAD = 1100, 420, 60
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="11">',
           f'<rect width="{W}" height="{H}" fill="white"/>']
    cmp = [c for c in d["cases"] if "vllm_triton_bf16_us" in c and c["suite"] != "lowlat"]
    x0, x1, y0, y1 = PAD, 560, H - 70, 40
    lo, hi = 10.0, 1000.0
    ty = lambda v: y0 - (math.log10(v) - math.log10(lo)) / (math.log10(hi) - math.log10(lo)) * (y0 - y1)
    out.append(f'<text x="{x0}" y="20" font-size="13">us per layer decode step (log scale): vLLM Triton BF16 KV vs ours NVFP4 KV</text>')
    for v in (10, 30, 100, 300, 1000):
        out.append(f'<line x1="{x0}" x2="{x1}" y1="{ty(v):.1f}" y2="{ty(v):.1f}" stroke="#ddd"/>'
                   f'<text x="{x0 - 6}" y="{ty(v) + 4:.1f}" text-anchor="end">{v}</text>')
    bw = (x1 - x0) / max(1, len(cmp))
    for i, c in enumerate(cmp):
        for j, (val, col) in enumerate(((c["vllm_triton_bf16_us"], "#999"), (c["us"], "#1f77b4"))):
            bx = x0 + i * bw + 4 + j * (bw - 8) / 2
            out.append(f'<rect x="{bx:.1f}" y="{ty(val):.1f}" width="{(bw - 8) / 2:.1f}" height="{y0 - ty(val):.1f}" fill="{col}"/>')
        label = f"{c['batch']}x{c['L'] // 1024}K" + (" q8" if c["q_len"] == 8 else "")
        out.append(f'<text x="{x0 + (i + 0.5) * bw:.1f}" y="{y0 + 14}" text-anchor="middle">{label}</text>')
    out.append(f'<rect x="{x0}" y="{H - 30}" width="10" height="10" fill="#999"/><text x="{x0 + 14}" y="{H - 21}">vLLM Triton</text>'
               f'<rect x="{x0 + 110}" y="{H - 30}" width="10" height="10" fill="#1f77b4"/><text x="{x0 + 124}" y="{H - 21}">ours</text>')
    # right panel
    X0, X1 = 650, W - 30
    out.append(f'<text x="{X0}" y="20" font-size="13">decode suite (8 queries): % of copy BW over the byte floor</text>')
    ymax = 40.0
    py = lambda v: y0 - v / ymax * (y0 - y1)
    lx = lambda L: X0 + (math.log2(L / 1024)) / math.log2(200) * (X1 - X0)
    for v in (0, 10, 20, 30, 40):
        out.append(f'<line x1="{X0}" x2="{X1}" y1="{py(v):.1f}" y2="{py(v):.1f}" stroke="#ddd"/>'
                   f'<text x="{X0 - 6}" y="{py(v) + 4:.1f}" text-anchor="end">{v}</text>')
    for L in (1024, 4096, 10240, 51200, 204800):
        out.append(f'<text x="{lx(L):.1f}" y="{y0 + 14}" text-anchor="middle">{L // 1024}K</text>')
    for k, (B, col) in enumerate(((8, "#2ca02c"), (32, "#ff7f0e"), (64, "#d62728"), (128, "#9467bd"))):
        cs = [c for c in d["cases"] if c["suite"] == "decode_q8" and c["batch"] == B]
        if cs:
            pts = " ".join(f"{lx(c['L']):.1f},{py(100 * c['frac_copy_bw']):.1f}" for c in cs)
            out.append(f'<polyline points="{pts}" fill="none" stroke="{col}" stroke-width="2"/>')
            out.append(f'<rect x="{X0 + k * 90}" y="{H - 30}" width="10" height="10" fill="{col}"/>'
                       f'<text x="{X0 + 14 + k * 90}" y="{H - 21}">batch {B}</text>')
    out.append("</svg>")
    open(path, "w").write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
