#!/usr/bin/env python3
"""Per-kernel SASS opcode counts from `cuobjdump -sass` output (stdin): which pipes the MSA kernels load.

Usage: cuobjdump -sass BINARY | sass_stats.py [--stats-only]

Static counts (instructions in the code, not executed), per function, largest first; then the SASS itself.
"""
import collections
import re
import sys

funcs = collections.OrderedDict()
text = sys.stdin.read()
cur = None
for line in text.splitlines():
    m = re.search(r"Function : (\S+)", line)
    if m:
        cur = m.group(1)
        funcs[cur] = collections.Counter()
        continue
    m = re.match(r"\s+/\*[0-9a-f]{4,6}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*(?:\.[A-Z0-9_]+)*)", line)
    if m and cur:
        op = m.group(1)
        base = op.split(".")[0]
        if op.startswith("IMAD.SHL") or op.startswith("IMAD.HI") or op.startswith("IMAD.MOV"):
            base = ".".join(op.split(".")[:2])
        funcs[cur][base] += 1
for name, cnt in funcs.items():
    if not any(k in name for k in ("index_topk", "attn_kernel")):
        continue
    print(f"== {name}: {sum(cnt.values())} instructions")
    print("   " + ", ".join(f"{k} {v}" for k, v in cnt.most_common(28)))
if "--stats-only" not in sys.argv:
    print()
    print(text if len(text) < 12_000_000 else text[:12_000_000])
