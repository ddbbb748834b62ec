#!/usr/bin/env python3
"""Tables of one GPU run: our CUDA MSA prefill (msa_cuda_prefill_bench) and decode (msa_cuda_decode_bench) against the
comparisons measured in the same run (torch_compare.py: dense SDPA with BF16 KV, MSA in plain PyTorch) and the vLLM
Triton figures of workloads.md section 3. Missing inputs are skipped.

Usage: summarize_compare.py [--prefill P.json] [--decode D.json] [--torch T.json] [--results OUT.json --commit C
       --date D --machine M] [--baseline RESULTS.json]
--baseline (a bench/results/cuda_prefill_*.json of an earlier run) adds a compact table at the end: this run's
prefill and decode times next to the earlier ones and the goals of issue 7.
"""
import argparse
import json

# Goals of issue 7 (ms): prefill cases and the 1 x 32K / 32 x 128K / q8 decode targets (us).
GOALS_PREFILL = {"8K from empty": "< dense", "32K from empty": "< dense", "128K in one chunk": "< 40",
                 "8K chunk on a 32K prefix": "< dense", "8K chunk on a 120K prefix": "< 4"}
GOALS_DECODE = {(1, 32768, 1): "< 10", (32, 131072, 1): "< 115", (32, 131072, 8): "< 200"}
# vLLM Triton BF16-KV MSA decode, us per layer-step (workloads.md section 3).
VLLM_DECODE = {(1, 8192, 1): 15.2, (1, 32768, 1): 17.3, (1, 131072, 1): 25.2, (8, 32768, 1): 42.9,
               (32, 32768, 1): 110.1, (32, 131072, 1): 304.4, (64, 65536, 1): 336.4, (8, 524288, 1): 335.3,
               (32, 32768, 8): 351.9, (32, 131072, 8): 627.8}


def load(path):
    if not path:
        return None
    try:
        text = open(path).read()
    except OSError:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError:  # cut short: keep complete case objects
        cases = []
        for line in text.splitlines():
            line = line.strip().lstrip(",").rstrip(",")
            if line.startswith("{\"case\"") or line.startswith("{\"suite\""):
                try:
                    cases.append(json.loads(line))
                except json.JSONDecodeError:
                    pass
        return {"cases": cases, "truncated": True}


def ratio(a, b):
    return round(a / b, 2) if a and b else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--prefill")
    ap.add_argument("--decode")
    ap.add_argument("--torch")
    ap.add_argument("--results")
    ap.add_argument("--commit", default="")
    ap.add_argument("--date", default="")
    ap.add_argument("--machine", default="NVIDIA H200")
    ap.add_argument("--baseline")
    a = ap.parse_args()
    pf, dc, tc = load(a.prefill), load(a.decode), load(a.torch)
    out = {"date": a.date, "machine": a.machine, "commit": a.commit, "prefill": [], "decode": []}
    tprefill = {c["case"]: c for c in (tc or {}).get("prefill", [])}
    tdecode = {(c["batch"], c["L"], c["q_len"]): c for c in (tc or {}).get("decode", [])}
    if pf:
        out["copy_bw_TBs"] = pf.get("copy_bw_TBs")
        print(f"## Prefill (ms per layer call; copy bandwidth {pf.get('copy_bw_TBs')} TB/s)\n")
        print("| case | ours | TFLOP/s | bytes model / floor | % copy BW (floor / model) | dense SDPA (this run) | "
              "x dense | plain PyTorch MSA (this run) | x torch | vLLM Triton | x vLLM |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for c in pf["cases"]:
            t = tprefill.get(c["case"], {})
            row = dict(c)
            row["dense_sdpa_ms"] = t.get("dense_sdpa_ms")
            row["torch_msa_ms"] = t.get("torch_msa_ms")
            row["speedup_vs_dense"] = ratio(t.get("dense_sdpa_ms"), c["ms"])
            row["speedup_vs_torch_msa"] = ratio(t.get("torch_msa_ms"), c["ms"])
            row["speedup_vs_vllm"] = ratio(c.get("vllm_ms"), c["ms"])
            out["prefill"].append(row)
            print(f"| {c['case']} | {c['ms']:.3f} | {c['tflops']} | {c['model_bytes_over_floor']} | "
                  f"{100 * c['frac_copy_bw_floor']:.1f} / {100 * c['frac_copy_bw_model']:.1f} | "
                  f"{row['dense_sdpa_ms']} | {row['speedup_vs_dense']} | {row['torch_msa_ms']} | "
                  f"{row['speedup_vs_torch_msa']} | {c.get('vllm_ms')} | {row['speedup_vs_vllm']} |")
        print()
    if dc or tdecode:
        print("## Decode (us per layer-step, CUDA graphs)\n")
        print("| batch x context, q | ours | % copy BW of floor | dense SDPA (this run) | x dense | "
              "plain PyTorch MSA (this run) | x torch | vLLM Triton | x vLLM |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        seen = set()
        for c in (dc or {}).get("cases", []):
            key = (c["batch"], c["L"], c["q_len"])
            if key in seen or (key not in VLLM_DECODE and key not in tdecode):
                continue
            seen.add(key)
            t = tdecode.get(key, {})
            v = VLLM_DECODE.get(key)
            row = {"batch": key[0], "L": key[1], "q_len": key[2], "us": c["us"], "frac_copy_bw": c["frac_copy_bw"],
                   "dense_sdpa_us": t.get("dense_sdpa_us"), "torch_msa_us": t.get("torch_msa_us"), "vllm_us": v,
                   "speedup_vs_dense": ratio(t.get("dense_sdpa_us"), c["us"]),
                   "speedup_vs_torch_msa": ratio(t.get("torch_msa_us"), c["us"]), "speedup_vs_vllm": ratio(v, c["us"])}
            out["decode"].append(row)
            print(f"| {key[0]} x {key[1]}, q{key[2]} | {c['us']:.1f} | {100 * c['frac_copy_bw']:.1f} | "
                  f"{row['dense_sdpa_us']} | {row['speedup_vs_dense']} | {row['torch_msa_us']} | "
                  f"{row['speedup_vs_torch_msa']} | {v} | {row['speedup_vs_vllm']} |")
        for key, t in tdecode.items():
            if key not in seen:
                out["decode"].append({"batch": key[0], "L": key[1], "q_len": key[2], **t})
        print()
    if tc:
        out["torch"] = {k: tc.get(k) for k in ("torch", "device", "wall_s")}
    if a.results:
        json.dump(out, open(a.results, "w"), indent=1)
    base = load(a.baseline)
    if base:
        compact(out, base)


def compact(out, base):
    """This run against an earlier one (same benchmark), with the goals."""
    print(f"## Compact: this run vs {base.get('commit', '')[:7]} ({base.get('date', '')})\n")
    print("| case | earlier | now | now/earlier | dense SDPA | vLLM | goal |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    bp = {c["case"]: c for c in base.get("prefill", [])}
    for c in out["prefill"]:
        b = bp.get(c["case"], {})
        dense = c.get("dense_sdpa_ms") or b.get("dense_sdpa_ms")
        print(f"| prefill {c['case']} (ms) | {b.get('ms', '-')} | {c['ms']:.3f} | {ratio(c['ms'], b.get('ms'))} | "
              f"{dense} | {c.get('vllm_ms')} | {GOALS_PREFILL.get(c['case'], '')} |")
    bd = {(c["batch"], c["L"], c["q_len"]): c for c in base.get("decode", []) if "us" in c}
    for c in out["decode"]:
        key = (c["batch"], c["L"], c["q_len"])
        if "us" not in c or key not in GOALS_DECODE:
            continue
        print(f"| decode {key[0]} x {key[1] // 1024}K q{key[2]} (us) | {bd.get(key, {}).get('us', '-')} | {c['us']} | "
              f"{ratio(c['us'], bd.get(key, {}).get('us'))} | {c.get('dense_sdpa_us')} | {c.get('vllm_us')} | "
              f"{GOALS_DECODE[key]} |")
    print()


if __name__ == "__main__":
    main()
