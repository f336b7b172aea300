"""robusteval's TextFooler-style attack vs the same attack assembled from TextAttack.

Same victim (BERTScore-F of the response against the dialogue context, MiniLM), same
transformation (TextAttack's WordSwapWordNet, all candidates), same constraints (no stop
words, no word twice, at most 30 % of the words), same search (greedy, word importance by
deletion), same goal (score drop >= DELTA points) and the same budget of 300 queries per
sample, on the best-rated response of the first 100 DailyDialog-Zhao contexts. Reports
ASR, the victim texts really scored (counted in the victim for both), and the queries
TextAttack's own counter reports (it counts cache hits as queries).

robusteval's ``textfooler-pos`` also applies TextFooler's own two constraints by default (same
part of speech, a sentence-similarity floor; Jin et al. 2020, §2.2), which the TextAttack side
does not: the like-for-like row turns them off (``same_pos=False, min_sim=None``), and a third
row runs the default attack, so the table shows what those constraints cost.

    ROBUSTEVAL_DATA=../shared/data .venv/bin/python benchmarks/attack_efficiency.py [N]
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np

from robusteval import attacks, data, metrics
from robusteval.attacks.constraints import USE_THRESHOLD
from robusteval.attacks.victim import CachedVictim
from robusteval.data.select import select
from robusteval.paths import ensure_nltk_data_path, no_nltk_downloads

DELTA = 10.0
BUDGET = 300


class CountingMetric:
    """Wraps a metric and counts the texts it really scores."""

    def __init__(self, metric):
        self.metric = metric
        self.texts = 0
        self.name = metric.name

    def score(self, samples):
        self.texts += len(samples)
        return self.metric.score(samples)


def textattack_attack(victim: CountingMetric, sample):
    from spacy.lang.en.stop_words import STOP_WORDS
    from textattack import Attack
    from textattack.constraints.overlap import MaxWordsPerturbed
    from textattack.constraints.pre_transformation import RepeatModification, StopwordModification
    from textattack.goal_functions.text import TextToTextGoalFunction
    from textattack.models.wrappers import ModelWrapper
    from textattack.search_methods import GreedyWordSwapWIR
    from textattack.transformations import WordSwapWordNet

    class Wrapper(ModelWrapper):
        def __init__(self) -> None:
            self.model = victim

        def __call__(self, texts):
            return np.asarray(victim.score([sample.with_response(t) for t in texts]), dtype=float)

    class ScoreDrop(TextToTextGoalFunction):
        def init_attack_example(self, attacked_text, ground_truth_output):
            self.initial = float(self.model([attacked_text.tokenizer_input])[0])
            return super().init_attack_example(attacked_text, ground_truth_output)

        def _is_goal_complete(self, model_output, _):
            return self.initial - float(model_output) >= DELTA

        def _get_score(self, model_output, _):
            return self.initial - float(model_output)

    goal = ScoreDrop(Wrapper(), query_budget=BUDGET)
    constraints = [RepeatModification(), StopwordModification(stopwords=set(STOP_WORDS)),
                   MaxWordsPerturbed(max_percent=0.3)]
    with no_nltk_downloads():
        transformation = WordSwapWordNet()
    return Attack(goal, constraints, transformation, GreedyWordSwapWIR(wir_method="delete"))


def main() -> int:
    if not os.environ.get("ROBUSTEVAL_DATA"):
        print("set ROBUSTEVAL_DATA to the data folder", file=sys.stderr)
        return 2
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    ensure_nltk_data_path()
    from textattack.attack_results import SuccessfulAttackResult

    samples = select(data.load("dailydialog-zhao"), "best-per-context")[:n]
    # one victim per implementation: BERTScore's embedding cache must not carry over
    metric = metrics.load("bertscore", against="context")
    metric_ta = metrics.load("bertscore", against="context")
    metric_full = metrics.load("bertscore", against="context")  # each arm its own metric: no warm embedding cache

    # warm-up both (imports, WordNet, model threads) on a sample outside the timed set
    warm = select(data.load("dailydialog-zhao"), "best-per-context")[n:n + 1] or samples[:1]
    same = attacks.load("textfooler-pos", goal="score-move", delta=DELTA, max_candidates=10_000, same_pos=False,
                        min_sim=None)  # TextAttack's components: no POS or similarity constraint
    full = attacks.load("textfooler-pos", goal="score-move", delta=DELTA, max_candidates=10_000)
    for attack, m in ((same, metric), (full, metric_full)):  # models and WordNet loaded before any clock starts
        attack.run(warm[0], CachedVictim(CountingMetric(m)), budget=BUDGET)
    textattack_attack(CountingMetric(metric_ta), warm[0]).attack(warm[0].response, 0)

    from textattack.attack_results import SkippedAttackResult

    from robusteval.attacks.base import COUNTED_OUTCOMES
    from robusteval.stats import pct, proportion, sign_test

    def run_ours(attack, m):
        """(verdicts, texts scored, seconds); a verdict is None where the sample was not attacked
        (no word the constraints allow to change). A fresh counting victim: no shared cache."""
        counter = CountingMetric(m)
        t = time.perf_counter()
        verdicts: list[bool | None] = []
        for s in samples:
            r = attack.run(s, CachedVictim(counter), budget=BUDGET)
            verdicts.append(bool(r.meta.get("goal_reached")) if r.outcome in COUNTED_OUTCOMES else None)
        return verdicts, counter.texts, time.perf_counter() - t

    ours_verdicts, ours_texts, ours_time = run_ours(same, metric)
    full_verdicts, full_texts, full_time = run_ours(full, metric_full)

    ta_metric = CountingMetric(metric_ta)
    t = time.perf_counter()
    ta_verdicts: list[bool | None] = []  # None: TextAttack's skipped result
    ta_queries = 0
    for s in samples:
        result = textattack_attack(ta_metric, s).attack(s.response, 0)
        ta_verdicts.append(None if isinstance(result, SkippedAttackResult)
                           else isinstance(result, SuccessfulAttackResult))
        ta_queries += result.perturbed_result.num_queries
    ta_time = time.perf_counter() - t

    # one denominator for both: the samples both attacked (TextAttack counts a sample with no
    # word to change as a failed attack; robusteval does not attack it)
    arms = [("robusteval textfooler-pos, TextAttack's components", ours_verdicts, ours_texts, ours_texts, ours_time),
            ("TextAttack (same components)", ta_verdicts, ta_metric.texts, ta_queries, ta_time),
            (f"robusteval textfooler-pos as shipped (+ same POS, similarity >= {USE_THRESHOLD:.2f})", full_verdicts,
             full_texts,
             full_texts, full_time)]
    both = [i for i in range(len(samples)) if all(arm[1][i] is not None for arm in arms)]
    print(f"TextFooler-style R+ attack, goal: BERTScore drop >= {DELTA:g}, budget {BUDGET}, "
          f"{len(samples)} samples (of {n} asked); ASR over the {len(both)} every arm attacked "
          f"(not attacked: robusteval {ours_verdicts.count(None)}, TextAttack {ta_verdicts.count(None)}, "
          f"robusteval as shipped {full_verdicts.count(None)})\n")
    print("| implementation | ASR % [95% CI] (fooled/attacked) | victim texts scored | queries it reports | time (s) |")
    print("|---|---|---|---|---|")
    for label, verdicts, texts, queries, secs in arms:
        common = [bool(verdicts[i]) for i in both]
        print(f"| {label} | {pct(proportion(common))} ({sum(common)}/{len(common)}) | {texts} | {queries} | "
              f"{secs:.1f} |")
    print(f"\nreal-call ratio TextAttack / robusteval (same components): {ta_metric.texts / max(ours_texts, 1):.2f}")
    # the two like-for-like arms on the same samples: McNemar's exact test is the sign test of the
    # per-sample differences (only the samples one arm fooled and the other did not count)
    t = sign_test([float(ta_verdicts[i]) - float(ours_verdicts[i]) for i in both],
                  [samples[i].conversation_key() for i in both])
    p = "n/a" if t["p"] is None else f"{t['p']:.3g}"
    print(f"paired, same samples: TextAttack alone fooled {t['up']}, robusteval alone {t['down']}; "
          f"exact two-sided p = {p}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
