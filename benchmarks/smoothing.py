"""Randomized median smoothing (issue 15): word-search ASR, validity, certified fraction and time.

Victims: BERTScore (MiniLM) against the dialogue context and, with ``--checkpoint``, a trained
cross-encoder export; each plain and smoothed (``--perturbations``, e.g. ``synonym`` with its
default symmetric classes and ``mask:0.9``). On the first ``--limit`` DailyDialog-Zhao contexts
(best-rated reply of each):

* ASR of ``textfooler-pos`` (R+) and ``textfooler-neg`` (R-), primary criterion, 95 % intervals:
  against the plain metric, *transfer* (the texts found against the plain metric re-scored by
  the smoothed one) and *adaptive* (the search run against the smoothed metric itself: every
  candidate is scored by its median over the draws);
* validity: Spearman with the human overall rating on the first ``--spearman-limit`` rated
  DailyDialog-Zhao replies, with the context-bootstrap interval, and each smoothed variant's
  change from plain with a *paired* interval (one resampling of conversations for both sides,
  :func:`robusteval.metaeval.correlation_change`);
* certified fraction: the share of attacked contexts whose certified radius at
  ``--tolerance`` points is at least 1, 2, 3 (``certified_fraction``), with Wilson intervals,
  or a bootstrap over conversations where several contexts share one;
* time: smoothed / plain scoring time on the same replies for n = 16, 32, 64, fresh metric
  objects with empty caches on both sides, median of 3 alternating repeats.

    ROBUSTEVAL_DATA=../shared/data .venv/bin/python benchmarks/smoothing.py --out-dir runs/smoothing \\
        [--checkpoint <cross-encoder export>] [--limit 25] [--budget 40] [--resume]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from robusteval import attacks, data, metrics
from robusteval.asr import asr_table
from robusteval.attacks.runner import run_attacks
from robusteval.compare.replay import replays
from robusteval.data.select import select
from robusteval.defenses import certified_fraction, smooth
from robusteval.metaeval import fmt_change, fmt_r, metaevaluate, metaevaluate_change
from robusteval.stats import pct

ATTACKS = ["textfooler-pos", "textfooler-neg"]


def perturbation(spec: str) -> tuple[str, dict[str, Any]]:
    """``synonym``, ``mask:0.9`` (a rate after the colon) or ``synonym:0.5,sets=wordnet``
    (comma-separated options after it; a bare number is the rate)."""
    name, _, rest = spec.partition(":")
    opts: dict[str, Any] = {}
    for item in filter(None, rest.split(",")):
        key, eq, value = item.partition("=")
        if not eq:
            key, value = "rate", item
        try:
            opts[key] = int(value) if value.isdigit() else float(value)
        except ValueError:
            opts[key] = value
    return name, opts


def build(victim: str, checkpoint: str | None) -> Any:
    if victim == "bertscore":
        return metrics.load("bertscore", against="context")
    return metrics.load("cross-encoder", checkpoint=checkpoint)


def timing(victim: str, checkpoint: str | None, samples: list[Any], warm: list[Any], spec: str, n: int) -> float:
    """Median smoothed / plain time over 3 alternating repeats: fresh metric objects on both
    sides (empty caches), each warmed up on other replies first (model loading is not timed)."""
    name, opts = perturbation(spec)
    plain_t, smooth_t = [], []
    for _ in range(3):
        m = build(victim, checkpoint)
        m.score(warm)
        t0 = time.perf_counter()
        m.score(samples)
        plain_t.append(time.perf_counter() - t0)
        base = build(victim, checkpoint)
        base.score(warm)
        s = smooth(base, name, n=n, seed=1, **opts)
        t0 = time.perf_counter()
        s.score(samples)
        smooth_t.append(time.perf_counter() - t0)
    return statistics.median(smooth_t) / statistics.median(plain_t)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--checkpoint", default=None, help="a trained cross-encoder export (adds that victim)")
    ap.add_argument("--perturbations", nargs="*", default=["synonym", "mask:0.9"],
                    help="name[:rate][,option=value...], e.g. mask:0.9 or synonym:sets=wordnet")
    ap.add_argument("--n", type=int, default=32)
    ap.add_argument("--limit", type=int, default=25)
    ap.add_argument("--spearman-limit", type=int, default=300)
    ap.add_argument("--budget", type=int, default=40)
    ap.add_argument("--tolerance", type=float, default=10.0)
    ap.add_argument("--time-n", type=int, nargs="*", default=[16, 32, 64])
    ap.add_argument("--time-samples", type=int, default=60)
    ap.add_argument("--resume", action="store_true")
    ap.add_argument("--timing", choices=("yes", "no", "only"), default="yes",
                    help="no: skip the time ratios (e.g. while other jobs share the cores); only: just them")
    args = ap.parse_args(argv)
    if not os.environ.get("ROBUSTEVAL_DATA"):
        print("set ROBUSTEVAL_DATA to the human-judgment data folder", file=sys.stderr)
        return 2
    everything = data.load("dailydialog-zhao", os.environ["ROBUSTEVAL_DATA"])
    attacked = select(everything, "best-per-context")[: args.limit]
    rated = everything[: args.spearman_limit]
    victims = ["bertscore"] + (["cross-encoder"] if args.checkpoint else [])
    out = Path(args.out_dir)
    print(f"dailydialog-zhao: {len(attacked)} attacked contexts, {len(rated)} rated replies for Spearman; "
          f"n = {args.n}; attacks {ATTACKS}, budget {args.budget}; certified at +-{args.tolerance:g} points")
    for victim in victims:
        if args.timing == "only":
            print_timing(victim, args, rated, everything[-2:])
            continue
        plain = build(victim, args.checkpoint)
        rows = list(run_attacks(attacked, attacks.select(ATTACKS), plain, out / victim / "plain" / "results.jsonl",
                                resume=args.resume, budget=args.budget, dataset="dailydialog-zhao"))
        tables = {"plain": asr_table(rows, key=lambda r: r.attack)}
        rated_scores = {"plain": plain.score(rated)}
        spearman = {"plain": metaevaluate(rated, rated_scores["plain"], ["overall"])["overall"]}
        certified: dict[str, list[int]] = {}
        for spec in args.perturbations:
            name, opts = perturbation(spec)
            smoothed = smooth(plain, name, n=args.n, seed=0, **opts)
            folder = out / victim / re.sub(r"[:,=]", "-", spec)
            transfer = list(run_attacks(attacked, replays(rows), smoothed, folder / "transfer" / "results.jsonl",
                                        resume=args.resume, budget=args.budget, dataset="dailydialog-zhao"))
            adaptive = list(run_attacks(attacked, attacks.select(ATTACKS), smoothed,
                                        folder / "adaptive" / "results.jsonl", resume=args.resume,
                                        budget=args.budget, dataset="dailydialog-zhao"))
            tables[f"{spec} transfer"] = asr_table(transfer, key=lambda r: r.attack)
            tables[f"{spec} adaptive"] = asr_table(adaptive, key=lambda r: r.attack)
            rated_scores[spec] = smoothed.score(rated)
            spearman[spec] = metaevaluate(rated, rated_scores[spec], ["overall"])["overall"]
            certified[spec] = smoothed.certified_radius(attacked, args.tolerance, max_radius=3)
        print(f"\n### {victim}\n")
        print("| attack | " + " | ".join(tables) + " |")
        print("|---|" + "---|" * len(tables))
        for a in ATTACKS:
            cells = [f"{pct(t[a]['primary'])} ({t[a]['primary']['successes']}/{t[a]['primary']['n']})"
                     if a in t else "–" for t in tables.values()]
            print(f"| {a} | " + " | ".join(cells) + " |")
        print("\n| variant | Spearman (overall) [95% CI] | change [paired 95% CI] | certified r>=1 | r>=2 | r>=3 |")
        print("|---|---|---|---|---|---|")
        print(f"| plain | {fmt_r(spearman['plain'])} | | | | |")
        for spec in args.perturbations:
            keys = [s.conversation_key() for s in attacked]
            fr = [certified_fraction(certified[spec], k, keys) for k in (1, 2, 3)]
            change = fmt_change(metaevaluate_change(rated, rated_scores["plain"], rated_scores[spec], "overall"))
            print(f"| {spec} | {fmt_r(spearman[spec])} | {change} | "
                  + " | ".join(f"{pct(f)} ({f['certified']}/{f['n']})" for f in fr) + " |")
        if args.timing == "yes":
            print_timing(victim, args, rated, everything[-2:])
    return 0


def print_timing(victim: str, args: argparse.Namespace, rated: list[Any], warm: list[Any]) -> None:
    print(f"\n{victim}: smoothed / plain scoring time, {args.time_samples} replies\n")
    print("| perturbation | " + " | ".join(f"time ratio n={n}" for n in args.time_n) + " |")
    print("|---|" + "---|" * len(args.time_n))
    for spec in args.perturbations:
        ratios = [timing(victim, args.checkpoint, rated[: args.time_samples], warm, spec, n) for n in args.time_n]
        print(f"| {spec} | " + " | ".join(f"{x:.1f}x" for x in ratios) + " |")


if __name__ == "__main__":
    sys.exit(main())
