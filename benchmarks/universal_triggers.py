"""Mu & Lim's universal triggers against the 16 SummEval systems under BERTScore (MiniLM).

Mean BERTScore-F (x100, best over the 11 references + original highlight) of each system's
100 summaries, next to the single "." and a GA-found non-alphanumeric trigger, both used as
the summary of every document. The GA is fitted on the first ``FIT_DOCS`` documents (distinct
references) and evaluated on the others only.

    ROBUSTEVAL_DATA=../shared/data .venv/bin/python benchmarks/universal_triggers.py
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np

from robusteval import attacks, data, metrics
from robusteval.attacks.victim import CachedVictim

FIT_DOCS = 8


def main() -> int:
    if not os.environ.get("ROBUSTEVAL_DATA"):
        print("set ROBUSTEVAL_DATA to the data folder", file=sys.stderr)
        return 2
    samples = data.load("summeval")
    metric = metrics.load("bertscore")
    victim = CachedVictim(metric)
    by_doc: dict[str, list] = {}
    for s in samples:
        by_doc.setdefault(s.meta["doc_id"], []).append(s)
    docs = [group[0] for group in by_doc.values()]
    fit_docs, eval_docs = docs[:FIT_DOCS], docs[FIT_DOCS:]
    eval_ids = {d.meta["doc_id"] for d in eval_docs}
    scores = metric.score(samples)
    rows = []
    for sys_id in sorted({s.meta["system_id"] for s in samples}):
        idx = [i for i, s in enumerate(samples) if s.meta["system_id"] == sys_id and s.meta["doc_id"] in eval_ids]
        rows.append((f"system {sys_id}", float(np.mean(scores[idx]))))
    dot = float(np.mean(victim.score(eval_docs[0], ["."]).tolist() +
                        [victim.score_one(d, ".") for d in eval_docs[1:]]))
    t = time.perf_counter()
    ga = attacks.load("ga-trigger", fit_size=FIT_DOCS, seed=0)
    trigger = ga.fit(fit_docs, victim)
    fit_time = time.perf_counter() - t
    ga_mean = float(np.mean([victim.score_one(d, trigger) for d in eval_docs]))
    rows.sort(key=lambda r: -r[1])
    print(f"BERTScore-F (all-MiniLM-L6-v2, layer {metric.num_layers}) on the {len(eval_docs)} SummEval "
          f"documents not used for fitting\n")
    print("| summary | mean BERTScore-F |\n|---|---|")
    for name, mean in rows:
        print(f"| {name} | {mean:.2f} |")
    print(f"| \".\" (dot trigger) | {dot:.2f} |")
    print(f"| GA trigger {trigger!r} | {ga_mean:.2f} |")
    beaten_dot = sum(mean < dot for _, mean in rows)
    beaten_ga = sum(mean < ga_mean for _, mean in rows)
    print(f"\nthe dot outscores {beaten_dot}/16 systems; the GA trigger outscores {beaten_ga}/16 "
          f"(GA: {len(ga.history)} rounds, {fit_time:.0f} s, {victim.model_calls} victim calls)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
