"""robusteval's BERTScore vs ``bert_score.BERTScorer`` on the same model and layer, same run.

(a) 1,000 SummEval (system summary, reference) pairs, each scorer with a cold cache;
(b) the attack-loop pattern: 20 rounds, each scoring 50 *new* candidates (one-word
    deletions of a SummEval summary, none repeated) against one fixed reference.
    (b-long) the reference is the source article (reference-free / source-based use);
    (b-short) the reference is the human highlight summary.

Prints time ratios BERTScorer / robusteval (> 1 means robusteval is faster) and checks the
F1 values agree. Median of 3 alternating repeats after one warm-up each.

    ROBUSTEVAL_DATA=../shared/data .venv/bin/python benchmarks/bertscore_speed.py
"""

from __future__ import annotations

import os
import random
import statistics
import sys
import time
from collections.abc import Callable

import numpy as np

from robusteval import data
from robusteval.metrics.bertscore import BERTScore, EmbeddingCache
from robusteval.paths import minilm_dir

REPEATS = 3


def timed(fn: Callable[[], object]) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main() -> int:
    if not os.environ.get("ROBUSTEVAL_DATA"):
        print("set ROBUSTEVAL_DATA to the data folder", file=sys.stderr)
        return 2
    import torch
    from bert_score import BERTScorer

    torch.set_num_threads(max(1, os.cpu_count() or 1))
    samples = data.load("summeval")
    ours = BERTScore()
    theirs = BERTScorer(model_type=str(minilm_dir()), num_layers=ours.num_layers)

    def cold() -> None:
        ours.cache = EmbeddingCache(ours.cache.capacity)

    # warm-up (thread pools, allocator)
    ours.prf(["warm up"], [["warm up text"]])
    theirs.score(["warm up"], ["warm up text"])

    # (a) 1,000 pairs
    pairs = samples[:1000]
    cands = [s.response for s in pairs]
    refs = [s.reference for s in pairs]
    t_ours, t_theirs = [], []
    for _ in range(REPEATS):
        cold()
        t_ours.append(timed(lambda: ours.prf(cands, [[r] for r in refs])))
        t_theirs.append(timed(lambda: theirs.score(cands, refs)))
    f_ours = ours.prf(cands, [[r] for r in refs])[:, 2]
    f_theirs = theirs.score(cands, refs)[2].numpy()
    a = statistics.median(t_theirs) / statistics.median(t_ours)
    print(f"(a) 1,000 SummEval pairs: BERTScorer {statistics.median(t_theirs):.2f} s, "
          f"robusteval {statistics.median(t_ours):.2f} s -> ratio {a:.2f}x "
          f"(max |F1 diff| {np.abs(f_ours - f_theirs).max():.1e})")

    # (b) 50 new candidates x 20 rounds against one reference
    rng = random.Random(0)
    doc = samples[0]
    words = samples[1].response.split()
    rounds = []
    seen: set[str] = set()
    while len(rounds) < 20:
        batch = []
        while len(batch) < 50:
            drop = sorted(rng.sample(range(len(words)), 2))
            cand = " ".join(w for i, w in enumerate(words) if i not in drop) + f" {len(seen)}"
            if cand not in seen:
                seen.add(cand)
                batch.append(cand)
        rounds.append(batch)
    for label, ref in (("b-long", doc.source_text()), ("b-short", doc.reference or "")):
        t_ours, t_theirs = [], []
        for _ in range(REPEATS):
            cold()
            t_ours.append(timed(lambda ref=ref: [ours.prf(c, [[ref]] * len(c)) for c in rounds]))
            t_theirs.append(timed(lambda ref=ref: [theirs.score(c, [ref] * len(c)) for c in rounds]))
        ratio = statistics.median(t_theirs) / statistics.median(t_ours)
        print(f"({label}) 50 candidates x 20 rounds vs one {len(ref.split())}-word reference: "
              f"BERTScorer {statistics.median(t_theirs):.2f} s, robusteval {statistics.median(t_ours):.2f} s "
              f"-> ratio {ratio:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
