"""Running the reference on prompts: batched prefill, then batched greedy decoding, with the records the parity
goldens need (logits at chosen positions, selected blocks, hidden-state taps)."""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import torch

from .model import MiniMaxM3ForCausalLM, Runtime


def argmax_with_margin(logits: torch.Tensor):
    """Greedy pick: the largest logit, ties to the lowest id; margin = top1 - top2."""
    mx = logits.max()
    t = int(torch.nonzero(logits == mx)[0, 0])
    rest = logits.clone()
    rest[t] = -math.inf
    return t, float(mx - rest.max())


@dataclass
class RunResult:
    logits: dict = field(default_factory=dict)      # (seq, pos) -> [V] logits after feeding the token at pos
    selections: dict = field(default_factory=dict)  # (layer, seq, pos) -> (sel [G, k], block scores [G, NB])
    routing: dict = field(default_factory=dict)     # (layer, seq, pos) -> MoE routing margin (recorded layers)
    taps: dict = field(default_factory=dict)        # (layer, seq) -> [n, hidden] residual after the layer (prefill)
    greedy: list = field(default_factory=list)      # per seq: the greedy tokens
    margins: list = field(default_factory=list)     # per seq: top1 - top2 logit of each greedy pick
    prefill_s: float = 0.0
    decode_s: float = 0.0


def run(model: MiniMaxM3ForCausalLM, prompts: list, rt: Runtime, n_greedy: int = 0, keep=None,
        record_layers=(), taps=()) -> RunResult:
    """Prefill all prompts in one batched step, then decode n_greedy greedy tokens for every sequence, one token per
    sequence per step (the first greedy token comes from the prefill's last logits, so n_greedy - 1 decode steps).
    keep(seq, pos) -> bool chooses which positions' logits and selections are returned (default: all)."""
    keep = keep or (lambda s, p: True)
    res = RunResult()
    states = [model.new_sequence(rt) for _ in prompts]
    t0 = time.time()
    r = model.step(states, [list(p) for p in prompts], rt, taps=taps, record_layers=record_layers)
    res.prefill_s = time.time() - t0
    _collect(res, r, [0] * len(prompts), keep)
    for li, per_seq in r.taps.items():
        for si, h in enumerate(per_seq):
            res.taps[(li, si)] = h
    cur = [lg[-1] for lg in r.logits]
    res.greedy = [[] for _ in prompts]
    res.margins = [[] for _ in prompts]
    t0 = time.time()
    for step in range(n_greedy):
        nxt = []
        for i, lg in enumerate(cur):
            t, m = argmax_with_margin(lg)
            res.greedy[i].append(t)
            res.margins[i].append(m)
            nxt.append([t])
        if step + 1 == n_greedy:
            break
        starts = [len(s) for s in states]
        r = model.step(states, nxt, rt, record_layers=record_layers)
        _collect(res, r, starts, keep)
        cur = [lg[-1] for lg in r.logits]
    res.decode_s = time.time() - t0
    return res


def _collect(res: RunResult, r, starts, keep):
    for si, lg in enumerate(r.logits):
        for i in range(lg.shape[0]):
            p = starts[si] + i
            if keep(si, p):
                res.logits[(si, p)] = lg[i]
    for li, recs in r.selections.items():
        for si, rec in enumerate(recs):
            for i, p in enumerate(rec["pos"].tolist()):
                if keep(si, p):
                    res.selections[(li, si, p)] = (rec["sel"][i], rec["block_scores"][:, i])
    for li, per_seq in r.routing.items():
        for si, mg in enumerate(per_seq):
            for i in range(mg.shape[0]):
                if keep(si, starts[si] + i):
                    res.routing[(li, si, starts[si] + i)] = float(mg[i])


def score(model: MiniMaxM3ForCausalLM, tokens: list, rt: Runtime, chunk: int = 512):
    """Per-token log-probabilities of tokens[1:] given their prefixes, through the inference path (KV cache,
    chunked prefill of `chunk` tokens). Returns a list of len(tokens) - 1 floats (natural log)."""
    st = model.new_sequence(rt)
    out = []
    for s in range(0, len(tokens), chunk):
        piece = tokens[s:s + chunk]
        lg = model.step([st], [piece], rt).logits[0].double()
        lp = torch.log_softmax(lg, dim=-1)
        for i in range(len(piece)):
            j = s + i + 1
            if j < len(tokens):
                out.append(float(lp[i, tokens[j]]))
    return out
