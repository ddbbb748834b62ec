#!/usr/bin/env python3
"""SVG plot of one comparison results file (bench/results/cuda_prefill_<date>.json, written by summarize_compare.py):
left, prefill ms per layer call; right, decode us per layer step; each case with ours, vLLM Triton (workloads.md),
dense SDPA and plain-PyTorch MSA measured in the same run. Log scales; plain Python, no matplotlib.

Usage: plot_compare.py RESULTS.json OUT.svg
"""
import json
import math
import sys

SERIES = (("ours", "#1f77b4"), ("vLLM Triton", "#999999"), ("dense SDPA", "#ff7f0e"), ("plain PyTorch MSA", "#2ca02c"))


def panel(out, x0, x1, y0, y1, title, unit, rows, lo, hi):
    """rows: (label, [value per SERIES or None])."""
    ty = lambda v: y0 - (math.log10(v) - math.log10(lo)) / (math.log10(hi) - math.log10(lo)) * (y0 - y1)  # noqa: E731
    out.append(f'<text x="{x0}" y="{y1 - 20}" font-size="13">{title}</text>')
    v = lo
    while v <= hi * 1.001:
        out.append(f'<line x1="{x0}" x2="{x1}" y1="{ty(v):.1f}" y2="{ty(v):.1f}" stroke="#ddd"/>'
                   f'<text x="{x0 - 6}" y="{ty(v) + 4:.1f}" text-anchor="end">{v:g}</text>')
        v *= 10
    out.append(f'<text x="{x0 - 40}" y="{(y0 + y1) / 2:.0f}" transform="rotate(-90 {x0 - 40} {(y0 + y1) / 2:.0f})" '
               f'text-anchor="middle">{unit}</text>')
    bw = (x1 - x0) / max(1, len(rows))
    n = len(SERIES)
    for i, (label, vals) in enumerate(rows):
        w = (bw - 8) / n
        for j, (val, (_, col)) in enumerate(zip(vals, SERIES)):
            if not val:
                continue
            val = min(max(val, lo), hi)
            bx = x0 + i * bw + 4 + j * w
            out.append(f'<rect x="{bx:.1f}" y="{ty(val):.1f}" width="{w:.1f}" height="{y0 - ty(val):.1f}" fill="{col}"/>')
        cx = x0 + (i + 0.5) * bw
        out.append(f'<text x="{cx:.1f}" y="{y0 + 14}" text-anchor="middle">{label}</text>')


def main():
    d = json.load(open(sys.argv[1]))
    W, H = 1200, 440
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="11">',
           f'<rect width="{W}" height="{H}" fill="white"/>']
    short = {"8K from empty": "8K", "32K from empty": "32K", "128K in one chunk": "128K",
             "8K chunk on a 32K prefix": "8K on 32K", "8K chunk on a 120K prefix": "8K on 120K"}
    prows = [(short.get(c["case"], c["case"]), [c.get("ms"), c.get("vllm_ms"), c.get("dense_sdpa_ms"),
                                                  c.get("torch_msa_ms")]) for c in d.get("prefill", [])]
    drows = [(f"{c['batch']}x{c['L'] // 1024}K" + (f" q{c['q_len']}" if c["q_len"] > 1 else ""),
              [c.get("us"), c.get("vllm_us"), c.get("dense_sdpa_us"), c.get("torch_msa_us")])
             for c in d.get("decode", [])]
    panel(out, 80, 560, H - 80, 60, f"prefill, ms per layer call (log), commit {d.get('commit', '')[:7]}", "ms",
          prows, 1, 10000)
    panel(out, 660, W - 20, H - 80, 60, "decode, us per layer step (log)", "us", drows, 10, 10000)
    for k, (name, col) in enumerate(SERIES):
        out.append(f'<rect x="{80 + k * 170}" y="{H - 30}" width="10" height="10" fill="{col}"/>'
                   f'<text x="{94 + k * 170}" y="{H - 21}">{name}</text>')
    out.append(f'<text x="{W - 20}" y="{H - 21}" text-anchor="end">{d.get("machine", "")[:60]}, {d.get("date", "")}</text>')
    out.append("</svg>")
    open(sys.argv[2], "w").write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
