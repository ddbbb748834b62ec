#!/usr/bin/env python3
"""Table of a decode option sweep (run_gpu.sh step dsweep): one row per case, one column per variant tag, median
us per layer-step. Usage: summarize_sweep.py SWEEP.jsonl [BENCH_JSON]  (lines of msa_cuda_decode_bench sel output;
cases cut short are skipped). With BENCH_JSON, a column with the same case from the default suite is added."""
import json
import sys


def lines(path):
    out = []
    try:
        for line in open(path):
            line = line.strip().lstrip(",")
            if line.startswith('{"suite"'):
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError:
                    pass
    except OSError:
        pass
    return out


def main():
    rows = lines(sys.argv[1])
    tags, table = [], {}
    for r in rows:
        tag = r.get("tag") or "default"
        if tag not in tags:
            tags.append(tag)
        key = (r["batch"], r["L"], r["q_len"])
        table.setdefault(key, {})[tag] = r
    suite = {}
    if len(sys.argv) > 2:
        for r in lines(sys.argv[2]):
            suite[(r["batch"], r["L"], r["q_len"])] = r["us"]
    print("| case | " + " | ".join(tags) + (" | suite |" if suite else " |"))
    print("|---|" + "---:|" * (len(tags) + (1 if suite else 0)))
    for key in sorted(table, key=lambda k: (k[2], k[0] * k[1], k[0])):
        cells = []
        for t in tags:
            r = table[key].get(t)
            cells.append("%.1f" % r["us"] if r else "-")
        if suite:
            cells.append("%.1f" % suite[key] if key in suite else "-")
        print("| %d x %dK%s | %s |" % (key[0], key[1] // 1024, " q%d" % key[2] if key[2] > 1 else "", " | ".join(cells)))
    print()
    print("plans: " + "; ".join(
        "%s %dx%dK q%d: splits %d cluster %d warps %d wpipe %d ready %d pdl %d prefetch %d idx_grid %d items/cta %d parts %d" % (
            r.get("tag") or "default", r["batch"], r["L"] // 1024, r["q_len"], r["attn_splits"], r.get("attn_cluster", -1),
            r.get("attn_warps", 4), r.get("warp_pipe", 0), r.get("ready", -1), r.get("pdl", -1), r.get("prefetch", -1),
            r.get("idx_grid", 0), r["idx_items_per_cta"], r["idx_parts"]) for r in rows))


if __name__ == "__main__":
    main()
