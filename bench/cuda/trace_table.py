#!/usr/bin/env python3
"""Tables the phase timelines printed by `msa_decode_bench trace` (a build with -DMSA_DECODE_TRACE).

Usage: trace_table.py FILE...   (each file: the bench's JSON output, several runs may be concatenated)
Per case: the call period and each event's earliest/latest time (us) after the call's first indexer CTA started.
"""
import json
import sys


def records(path):
    for line in open(path):
        line = line.strip().lstrip(",")
        if line.startswith("{") and '"trace"' in line:
            yield json.loads(line)


def main():
    for path in sys.argv[1:]:
        for r in records(path):
            t = r["trace"]
            print(f"## {r['batch']} x {r['L']} q{r['q_len']} {r.get('tag', '')}: {r['us']:.2f} us per call "
                  f"(period {t['period_us']:.2f})")
            for k, v in t.items():
                if k != "period_us":
                    print(f"  {k:14s} {v[0]:8.2f} {v[1]:8.2f}")


if __name__ == "__main__":
    main()
