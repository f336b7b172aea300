"""Invariance of the pairwise LLM judge (issue 16): position and rubric flip rates on real data.

The judge (``llm-pairwise``, the local SmolLM2-135M-Instruct unless ``--backend`` names another,
probability-weighted verdicts) compares two replies to the same DailyDialog-Zhao context: the
best- and the worst-rated of each context (one pair per context, ``--limit`` pairs; contexts whose
replies share one rating are skipped), the better one shown as the response in every other pair.
For each variant (``isolation`` off and on):

* the **position flip rate** -- how often the verdict (response wins / loses / tie within
  ``--margin`` of 0.5) changes when the two answers swap positions (Zheng et al. 2023, §3.3,
  :func:`robusteval.metrics.pairwise.position_flips`);
* the **rubric flip rate** -- how often the position-averaged verdict changes when the rubric
  is reworded (``pairwise`` -> ``pairwise-reworded``; RobustJudge 2025,
  :func:`robusteval.metrics.pairwise.rubric_flips`);
* the **first-position preference** -- the share of the 2n prompts in which the answer shown
  first wins, with its interval (0.5 = no position preference), which says *why* verdicts flip;
* **agreement with people** -- the share of pairs whose position-averaged verdict names the
  better-rated reply (a tie counts as no), so a variant that is steadier only because it says
  less is visible.

SummEval and USR pairs are not run by default: their prompts carry the article or the knowledge
snippet, and the local judge took 8-15 s per such prompt on 2 cores.

Every rate comes from :func:`robusteval.stats.flip_rate` / ``proportion`` (flips / n, Wilson or
cluster interval). Fresh judge objects per variant; the two orders of a variant share its
memo, which is why the rubric check costs only the reworded prompts.

    ROBUSTEVAL_DATA=../shared/data .venv/bin/python benchmarks/judge_flips.py [--limit 60] [--margin 0.0]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

from robusteval import data, metrics
from robusteval.metrics.pairwise import position_flips, rubric_flips, verdict
from robusteval.stats import pct, proportion
from robusteval.types import Sample


def pairs(samples: list[Sample], limit: int) -> list[tuple[Sample, bool]]:
    """One pair per context: its best- and worst-rated replies (contexts whose replies all
    share one rating are skipped). The judged sample's response is the best reply and its
    ``reference`` the worst in even-numbered pairs, the other way round in odd ones, so a judge
    that favours one slot cannot look right. Returns (sample, the response is the better reply)."""
    by_context: dict[str, list[Sample]] = {}
    for s in samples:
        if s.human.get("overall") is not None:
            by_context.setdefault(s.context_key(), []).append(s)
    out: list[tuple[Sample, bool]] = []
    for group in by_context.values():
        ranked = sorted(group, key=lambda s: s.human["overall"])
        worst, best = ranked[0], ranked[-1]
        if worst.human["overall"] == best.human["overall"]:
            continue
        first_best = len(out) % 2 == 0
        resp, ref = (best, worst) if first_best else (worst, best)
        out.append((dataclasses.replace(resp, reference=ref.response), first_best))
        if len(out) >= limit:
            break
    return out


def first_wins(ab: Sequence[float], ba: Sequence[float], clusters: Sequence[str],
               margin: float = 0.0) -> dict[str, Any]:
    """Share of the 2n prompts in which the answer shown first wins (a tie within ``margin`` of
    0.5 is not a win, the rule of :func:`~robusteval.metrics.pairwise.verdict` that the flip rates
    use): ``ab`` = P(response wins) with the response first, ``ba`` = the same with the reference
    first."""
    wins = [verdict(float(p), margin) == "win" for p in ab] + [verdict(float(p), margin) == "loss" for p in ba]
    return proportion(wins, list(clusters) * 2, names=("first_wins", "rate"))


def agreement(probs: Sequence[float], better: Sequence[bool], clusters: Sequence[str], margin: float) -> dict[str, Any]:
    """Share of pairs whose verdict names the better-rated reply (``better``: the response is
    it); a tie within ``margin`` counts as no."""
    said = [verdict(float(p), margin) for p in probs]
    return proportion([v == ("win" if b else "loss") for v, b in zip(said, better, strict=True)], clusters,
                      names=("agree", "rate"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--limit", type=int, default=60, help="pairs (one per DailyDialog-Zhao context)")
    ap.add_argument("--margin", type=float, default=0.0, help="|P(win) - 0.5| at or below this is a tie")
    ap.add_argument("--backend", default="local")
    args = ap.parse_args(argv)
    if not os.environ.get("ROBUSTEVAL_DATA"):
        print("set ROBUSTEVAL_DATA to the human-judgment data folder", file=sys.stderr)
        return 2
    judged = pairs(data.load("dailydialog-zhao", os.environ["ROBUSTEVAL_DATA"]), args.limit)
    samples = [s for s, _ in judged]
    clusters = [s.conversation_key() for s in samples]
    print(f"dailydialog-zhao: {len(samples)} pairs (best vs worst-rated reply of a context); margin {args.margin}")
    print("| isolation | position flips % [95% CI] | rubric flips % [95% CI] | first answer wins % [95% CI] "
          "| agrees with people % [95% CI] | s |")
    print("|---|---|---|---|---|---|")
    for isolation in (False, True):
        t0 = time.perf_counter()
        judge = metrics.load("llm-pairwise", backend=args.backend, mode="prob", order="both", isolation=isolation)
        pos = position_flips(judge, samples, margin=args.margin, clusters=clusters)
        rub = rubric_flips(judge, samples, margin=args.margin, clusters=clusters)
        first = first_wins(judge.win_probs(samples, order="ab"), judge.win_probs(samples, order="ba"), clusters,
                           args.margin)
        agree = agreement(judge.win_probs(samples), [b for _, b in judged], clusters, args.margin)
        print(f"| {'on' if isolation else 'off'} | {pct(pos)} ({pos['flips']}/{pos['n']}) "
              f"| {pct(rub)} ({rub['flips']}/{rub['n']}) | {pct(first)} ({first['first_wins']}/{first['n']}) "
              f"| {pct(agree)} ({agree['agree']}/{agree['n']}) | {time.perf_counter() - t0:.0f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
