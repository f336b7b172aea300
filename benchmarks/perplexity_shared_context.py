"""Perplexity given the context, with and without reusing the context's KV cache.

A guard screens an attack's candidates one sample at a time: every candidate follows the same
dialogue context. ``LocalCausalLM.text_nll`` runs that context once and continues each batch
of candidates from its KV cache (texts sharing >= ``min_shared_context`` tokens); with the
sharing switched off (``min_shared_context`` = infinity) every candidate is run with its own
copy of the context, as before. This script times both on the same texts:

* for each of the first ``--contexts`` held-out well-rated English DailyDialog-Zhao replies,
  the candidates are the reply itself and every static dialogue-rule attack's text of it
  (Vasselli & Watanabe, Table 2), screened in one ``detect`` call per context, as a search
  screens its candidates;
* each mode gets a fresh detector (no memo), the model warmed on an unrelated text first; the
  modes alternate over ``--repeats`` rounds and each reports its median time;
* it prints the time ratio (without / with), the largest difference in log-perplexity between
  the modes, and whether any text's flag (shipped default threshold) differs.

``--per-context 1 --one-call`` scores each reply alone, all of them in one ``detect`` call: the
case of calibrating on clean replies that do not share a context, where the context's cache
buys nothing, costs a second forward pass per text and gives up batching different contexts
together; the ratio says what that costs.

    ROBUSTEVAL_DATA=../shared/data .venv/bin/python benchmarks/perplexity_shared_context.py [--contexts 30]
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time

import numpy as np
from robusteval.detectors.clean import in_heldout, load_clean

from robusteval import attacks, detectors
from robusteval.types import Sample


def candidates(reply: Sample, rules: list[attacks.Attack]) -> list[Sample]:
    """The reply and every rule's text of it (the rules that change it)."""
    out = [reply]
    for a in rules:
        r = a.run(reply)
        if r.outcome == "attacked" and r.adversarial:
            out.append(Sample(id=f"{reply.id}/{a.name}", task=reply.task, context=reply.context,
                              response=r.adversarial, meta=reply.meta))
    return out


def screen(groups: list[list[Sample]], share: bool, one_call: bool) -> tuple[float, list[float], list[bool]]:
    """Seconds to score every group (one detect call each, or all in one) with a fresh detector,
    the log-perplexities and the shipped-default flags."""
    d = detectors.load("perplexity")
    d.lm.min_shared_context = 16 if share else 10**9
    d.lm.text_nll(["warm up the model ."], prefixes=["an unrelated context ."])
    flat = [s for g in groups for s in g]
    start = time.perf_counter()
    for g in [flat] if one_call else groups:
        d.detect(g)
    took = time.perf_counter() - start
    rows = d.analyze(flat)  # from the memo: no model call
    return took, [math.log(r["perplexity"]) for r in rows], d.flags(flat).tolist()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--contexts", type=int, default=30, help="held-out replies (one screening call each)")
    ap.add_argument("--repeats", type=int, default=3, help="alternating rounds per mode")
    ap.add_argument("--one-call", action="store_true", help="every text in one detect call")
    ap.add_argument("--per-context", type=int, default=None,
                    help="texts screened per context: the reply and its first k-1 attack texts (default: all)")
    args = ap.parse_args(argv)
    data_dir = os.environ.get("ROBUSTEVAL_DATA")
    if not data_dir:
        print("set ROBUSTEVAL_DATA to the human-judgment data folder", file=sys.stderr)
        return 2
    good = [s for s in load_clean("dailydialog-good", split="all", data_dir=data_dir) if in_heldout(s)]
    rules = attacks.select("family:dialogue-rules", seed=0)
    groups = [candidates(s, rules)[:args.per_context] for s in good[:args.contexts]]
    n = sum(len(g) for g in groups)
    times: dict[bool, list[float]] = {True: [], False: []}
    values: dict[bool, tuple[list[float], list[bool]]] = {}
    for k in range(args.repeats):
        for share in ((False, True) if k % 2 == 0 else (True, False)):
            took, lnppl, flags = screen(groups, share, args.one_call)
            times[share].append(took)
            values[share] = (lnppl, flags)
            print(f"round {k + 1}: {'shared' if share else 'own copy'} {took:.1f} s", file=sys.stderr, flush=True)
    own, shared = statistics.median(times[False]), statistics.median(times[True])
    diff = float(np.max(np.abs(np.array(values[True][0]) - np.array(values[False][0]))))
    flips = sum(a != b for a, b in zip(values[True][1], values[False][1], strict=True))
    calls = 1 if args.one_call else len(groups)
    print(f"{len(groups)} contexts, {n} texts ({n / len(groups):.1f} per context) in {calls} detect call(s), "
          f"{args.repeats} rounds")
    print("| mode | median s | s per text |\n|---|---|---|")
    print(f"| each text with its own copy of the context | {own:.1f} | {own / n:.3f} |")
    print(f"| the context run once, its KV cache reused | {shared:.1f} | {shared / n:.3f} |")
    print(f"speed-up {own / shared:.2f}x; largest |difference| in ln perplexity {diff:.2e}; flags that differ: {flips}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
