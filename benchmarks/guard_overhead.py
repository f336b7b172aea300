"""Cost of a guard: guarded / plain scoring time for BERTScore (MiniLM) on 1,000 SummEval
pairs, with the detectors nonalnum + parse_triple + gec (builtin backend), in one run.

Both sides start cold every repeat: BERTScore's embedding cache is emptied, and for the
guarded side the shared spaCy parse cache, the word-lookup caches of the grammar rules and
the language-identification cache are cleared too, and every repeat gets fresh detector
objects (a detector memoizes its analyses, so a reused one would time cache hits; the script
checks that no repeat was served from it).
Models (MiniLM, spaCy, WordNet, wordfreq) are loaded before timing, as a
long-running service would have them. Median of 3 alternating repeats (``--repeats``) after a
warm-up, and the ratio within each repeat (plain and guarded timed back to back), which is meant
to drift less with the machine's speed than the ratio of the two medians. Target: ratio <= 1.25.

    ROBUSTEVAL_DATA=../shared/data .venv/bin/python benchmarks/guard_overhead.py
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Callable

import numpy as np
from robusteval.detectors import grammar_rules, parsing

from robusteval import data, detectors, langid
from robusteval.metrics.base import Metric
from robusteval.metrics.bertscore import BERTScore, EmbeddingCache
from robusteval.nlp import load_spacy

REPEATS = 3
DETECTORS = ["nonalnum", "parse_triple", {"name": "gec", "options": {"backend": "builtin"}}]


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=REPEATS, help="alternating cold repeats (default 3)")
    repeats = ap.parse_args(argv).repeats
    if not os.environ.get("ROBUSTEVAL_DATA"):
        print("set ROBUSTEVAL_DATA to the data folder", file=sys.stderr)
        return 2
    import torch

    torch.set_num_threads(max(1, os.cpu_count() or 1))
    pairs = data.load("summeval")[:1000]
    plain = BERTScore()
    guarded = detectors.guard(plain, DETECTORS, policy="flag")
    # warm-up: load spaCy, WordNet, wordfreq and the thread pools
    guarded.score(pairs[:8])

    def cold() -> None:
        nonlocal guarded
        plain.cache = EmbeddingCache(plain.cache.capacity)
        parsing.clear()
        grammar_rules.is_known_word.cache_clear()
        grammar_rules._wordnet_morphy.cache_clear()
        langid.clear_cache()  # each response's (and word's) language evidence, asked by parse_triple and gec
        load_spacy().get_pipe("attribute_ruler_fast").clear_cache()  # the rules worked out per token key
        guarded = detectors.guard(plain, DETECTORS, policy="flag")  # fresh detectors: empty memos

    times: dict[str, list[float]] = {"plain": [], "guarded": []}
    flagged: dict[str, int] = {}
    busy: list[float] = []
    for _ in range(repeats):
        for name in ("plain", "guarded"):
            cold()
            metric = plain if name == "plain" else guarded
            t, c = time.perf_counter(), time.process_time()
            scores = metric.score(pairs)
            times[name].append(time.perf_counter() - t)
            if name == "plain":
                reference = scores
                # cores the plain metric keeps busy: what screening beside it in parallel could use
                busy.append((time.process_time() - c) / times[name][-1])
            else:  # policy "flag" leaves the scores untouched
                assert np.allclose(scores, reference)
                assert all(d.memo_hits == 0 for d in guarded.detectors), "a repeat timed memo hits"
                for k, v in guarded.report()["guard"]["flagged"].items():
                    flagged[k] = flagged.get(k, 0) + v
    # where the guarded time goes: each detector alone, cold
    parts = {}
    for i in range(len(DETECTORS)):
        cold()
        det = guarded.detectors[i]
        t = time.perf_counter()
        det.detect(pairs)
        parts[det.name] = time.perf_counter() - t
        assert det.memo_hits == 0
    idle = idle_cpu_metric(pairs, cold, repeats)
    p, g = statistics.median(times["plain"]), statistics.median(times["guarded"])
    refs = {r for s in pairs for r in s.all_references()}
    print(f"pairs: {len(pairs)}; distinct references: {len(refs)}; cpu threads: {torch.get_num_threads()}")
    print(f"plain BERTScore   median {p:.2f} s  ({', '.join(f'{x:.2f}' for x in times['plain'])}); "
          f"CPU / wall {statistics.median(busy):.2f} of {os.cpu_count()} cores")
    print(f"guarded BERTScore median {g:.2f} s  ({', '.join(f'{x:.2f}' for x in times['guarded'])})")
    print("detectors alone (cold): " + ", ".join(f"{k} {v:.2f} s" for k, v in parts.items()))
    print(f"flags with default thresholds over all repeats: {flagged}")
    print(f"ratio guarded / plain: {g / p:.3f}  (target <= 1.25)")
    # each repeat times plain then guarded back to back: on a machine whose speed drifts between
    # repeats, the ratio within a repeat is meant to be steadier than the ratio of two medians
    paired = sorted(gt / pt for pt, gt in zip(times["plain"], times["guarded"], strict=True))
    print(f"ratio within each repeat: {', '.join(f'{r:.3f}' for r in paired)} (median {statistics.median(paired):.3f})")
    print(f"metric that leaves the CPU idle ({WAIT * 1e3:.0f} ms a pair): plain {idle['plain']:.2f} s, "
          f"guarded {idle['sequential']:.2f} s (ratio {idle['sequential'] / idle['plain']:.3f}), "
          f"guarded with prefetch {idle['prefetch']:.2f} s (ratio {idle['prefetch'] / idle['plain']:.3f})")
    return 0


WAIT = 0.012  # s a pair: about BERTScore's own time per pair here


class Waiting(Metric):
    """A stand-in for a metric whose work happens elsewhere (a judge server, a GPU): it waits
    ``WAIT`` a pair without using the CPU, so only the guard's own work competes for it."""

    name = "waiting"
    device = "cuda"  # what GuardedMetric asks (Metric.leaves_cpu_idle) to turn prefetch on

    def _score(self, samples: list) -> np.ndarray:
        time.sleep(WAIT * len(samples))
        return np.zeros(len(samples))


def idle_cpu_metric(pairs: list, cold: Callable[[], None], repeats: int = REPEATS) -> dict[str, float]:
    """Median of ``repeats`` cold repeats: the waiting metric alone, guarded with screening after scoring
    (prefetch off), and guarded with the detectors' parses in a helper while it waits."""
    times: dict[str, list[float]] = {"plain": [], "sequential": [], "prefetch": []}
    flags: dict[str, list[dict[str, int]]] = {"sequential": [], "prefetch": []}
    for _ in range(repeats):
        for name in times:
            cold()
            metric: Metric = Waiting()
            if name != "plain":
                metric = detectors.guard(metric, DETECTORS, policy="flag", prefetch=name == "prefetch")
            t = time.perf_counter()
            metric.score(pairs)
            times[name].append(time.perf_counter() - t)
            if name != "plain":  # the same screening both ways, none of it served from a memo
                assert all(d.memo_hits == 0 for d in metric.detectors), "a repeat timed memo hits"
                flags[name].append(dict(metric.report()["guard"]["flagged"]))
    assert flags["sequential"] == flags["prefetch"], "prefetch changed the flags"
    return {k: statistics.median(v) for k, v in times.items()}


if __name__ == "__main__":
    sys.exit(main())
