"""robusteval's TextFooler-style attack vs the same attack assembled from TextAttack.

Same victim (BERTScore-F of the response against the dialogue context, MiniLM), same
transformation (TextAttack's WordSwapWordNet, all candidates), same constraints (no stop
words, no word twice, at most 30 % of the words), same search (greedy, word importance by
deletion), same goal (score drop >= DELTA points) and the same budget of 300 queries per
sample, on the best-rated response of the first 100 DailyDialog-Zhao contexts. Reports
ASR, the victim texts really scored (counted in the victim for both), and the queries
TextAttack's own counter reports (it counts cache hits as queries).

    ROBUSTEVAL_DATA=../shared/data .venv/bin/python benchmarks/attack_efficiency.py [N]
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np

from robusteval import attacks, data, metrics
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

    # warm-up both (imports, WordNet, model threads) on a sample outside the timed set
    warm = select(data.load("dailydialog-zhao"), "best-per-context")[n:n + 1] or samples[:1]
    ours = attacks.load("textfooler-pos", goal="score-move", delta=DELTA, max_candidates=10_000)
    ours.run(warm[0], CachedVictim(CountingMetric(metric)), budget=BUDGET)
    textattack_attack(CountingMetric(metric_ta), warm[0]).attack(warm[0].response, 0)

    from textattack.attack_results import SkippedAttackResult

    from robusteval.attacks.base import COUNTED_OUTCOMES
    from robusteval.stats import pct, proportion

    ours_metric = CountingMetric(metric)
    t = time.perf_counter()
    ours_verdicts: list[bool | None] = []  # None: not attacked (no word the constraints allow to change)
    for s in samples:
        r = ours.run(s, CachedVictim(ours_metric), budget=BUDGET)
        ours_verdicts.append(bool(r.meta.get("goal_reached")) if r.outcome in COUNTED_OUTCOMES else None)
    ours_time = time.perf_counter() - t

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
    both = [i for i in range(len(samples)) if ours_verdicts[i] is not None and ta_verdicts[i] is not None]
    print(f"TextFooler-style R+ attack, goal: BERTScore drop >= {DELTA:g}, budget {BUDGET}, "
          f"{len(samples)} samples (of {n} asked); ASR over the {len(both)} both attacked "
          f"(not attacked: robusteval {ours_verdicts.count(None)}, TextAttack {ta_verdicts.count(None)})\n")
    print("| implementation | ASR % [95% CI] (fooled/attacked) | victim texts scored | queries it reports | time (s) |")
    print("|---|---|---|---|---|")
    for label, verdicts, texts, queries, secs in (
            ("robusteval textfooler-pos", ours_verdicts, ours_metric.texts, ours_metric.texts, ours_time),
            ("TextAttack (same components)", ta_verdicts, ta_metric.texts, ta_queries, ta_time)):
        common = [bool(verdicts[i]) for i in both]
        print(f"| {label} | {pct(proportion(common))} ({sum(common)}/{len(common)}) | {texts} | {queries} | "
              f"{secs:.1f} |")
    print(f"\nreal-call ratio TextAttack / robusteval: {ta_metric.texts / max(ours_metric.texts, 1):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
