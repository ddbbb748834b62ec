#!/usr/bin/env python3
"""Table of msa_cpu_bench decode records: threads, spin_us, tokens/s, fraction of bandwidth and the pool profile
(loops, worker sleeps, us inside loops and outside them per token, the three largest call sites).

    python3 bench/cpu_spin_table.py cpu_*.json
"""
import json
import sys


def main(paths):
    rows = []
    for path in paths:
        with open(path) as f:
            records = json.load(f)
        bw = next((r["value"] for r in records if r["figure"] == "reference_bandwidth"), None)
        for r in records:
            if not r["figure"].endswith("_decode"):
                continue
            pool = r.get("pool", {})
            sites = ", ".join("%s %.0f" % (s["site"].split("/")[-1], s["us"]) for s in pool.get("sites", [])[:3])
            # The commit, the kernels' instruction set, how the cache was evicted and whether the threads were pinned tell the
            # A/B variants apart.
            name = r["figure"] + " " + r["commit"].split()[0] + (" " + r["simd"] if "simd" in r else "")
            if "evicted by" in r.get("cache", ""):
                name += " evict-" + r["cache"].split("evicted by ")[1].split()[0]
            if r.get("pinned"):
                name += " pinned"
            rows.append((name, r["threads"], r.get("spin_us", ""), r["value"], r.get("fraction_of_bandwidth"),
                         bw, pool.get("loops"), pool.get("worker_sleeps"), pool.get("us_in_pool_loops"),
                         pool.get("us_outside"), sites))
    rows.sort(key=lambda x: (x[0], x[1], x[2]))
    print("| figure | threads | spin us | tokens/s | fraction | bandwidth GB/s | loops | sleeps | us in loops | "
          "us outside | largest sites (us) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    fmt = lambda v, p: "" if v is None else ("%.*f" % (p, v))
    for fig, t, s, v, frac, bw, loops, sleeps, inl, outl, sites in rows:
        print("| %s | %s | %s | %.1f | %s | %s | %s | %s | %s | %s | %s |" % (
            fig, t, s, v, fmt(frac, 3), fmt(bw, 1), fmt(loops, 0), fmt(sleeps, 1), fmt(inl, 0), fmt(outl, 0), sites))


if __name__ == "__main__":
    main(sys.argv[1:])
