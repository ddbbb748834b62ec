#!/usr/bin/env python3
"""Stall reasons of each profiled kernel from Nsight Compute's per-SASS-line source page (run_gpu.sh steps ncusrc/pncusrc:
`ncu -i REPORT --page source --csv --print-source sass | gzip > X.csv.gz`): totals per stall reason, per opcode
(share of samples and of executed instructions), and the 30 SASS lines with the most samples.

Usage: ncu_stalls.py X.csv.gz
"""
import csv, gzip, sys, collections


def report(hdr, data):
    ix = {h: i for i, h in enumerate(hdr)}
    stall_cols = [h for h in hdr if h.startswith('stall_') and 'Not Issued' not in h]
    tot = collections.Counter(); n = 0
    lines = []
    for r in data:
        if len(r) < len(hdr): continue
        s = int(r[ix['Warp Stall Sampling (All Samples)']] or 0); n += s
        for h in stall_cols:
            tot[h] += int(r[ix[h]] or 0)
        lines.append((s, r[ix['Address']][-5:], r[ix['Source']].strip(), {h: int(r[ix[h]] or 0) for h in stall_cols}, int(r[ix['Instructions Executed']] or 0)))
    n = max(n, 1)
    ti = max(sum(l[4] for l in lines), 1)
    print('total samples', n, ' warp instructions executed', ti)
    for h, v in tot.most_common(12): print(f'{h:28s} {v:8d} {100*v/n:5.1f}%')
    # group by opcode
    op = collections.Counter(); opi = collections.Counter()
    for s, a, src, st, ie in lines:
        o = src.split()[0] if src else '?'
        if o.startswith('@'): o = src.split()[1]
        o = o.split('.')[0]
        op[o] += s; opi[o] += ie
    print('\nby opcode: samples%, executed instr%')
    for o, v in op.most_common(25): print(f'{o:12s} {100*v/n:5.1f}%  {100*opi[o]/ti:5.1f}%')
    print('\ntop lines')
    for s, a, src, st, ie in sorted(lines, key=lambda x: -x[0])[:30]:
        top = sorted(st.items(), key=lambda x: -x[1])[:2]
        print(f'{100*s/n:5.2f}% {a} {src[:60]:60s} ' + ' '.join(f'{k[6:]}={v}' for k, v in top))


# A report of several kernels (ncusrc profiles the indexer and the attention) repeats the header row per kernel.
rows = list(csv.reader(gzip.open(sys.argv[1], 'rt')))
heads = [i for i, r in enumerate(rows) if 'Warp Stall Sampling (All Samples)' in r]
for k, h in enumerate(heads):
    end = heads[k + 1] - 1 if k + 1 < len(heads) else len(rows)
    if len(heads) > 1: print(f'\n=== kernel {k + 1} of {len(heads)} (in the order profiled)')
    report(rows[h], rows[h + 1:end])
