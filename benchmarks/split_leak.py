"""The split leak that splitting by conversation closed (BENCHMARKS §11, "The split leak").

Part 1, for each rated set and seed: held-out (val + test) rated rows whose reply a train-split
pre-training positive holds right after its own preceding turns
(:func:`robusteval.training.ssl.learned_replies`): among every positive the train contexts give,
and among the positives pre-training actually draws with the harden configs' ``pretrain.limit``
(600 per set, :func:`robusteval.training.data.ssl_positives`); split by the exact context, as
every run of code before 47adb2f (2026-11-26) was, and by conversation, as now.

Part 2, for each export given (``SEED=EXPORT``, trained on the old split with the limit): its
Spearman on the ConTurE-turn test split of that seed, on all rows, on the rows whose reply it
pre-trained on, and on the rest: did the leak inflate the tables?

    ROBUSTEVAL_DATA=../shared/data .venv/bin/python benchmarks/split_leak.py \\
        0=runs/<seed-0 run>/round_0/finetune/export 1=runs/<seed-1 run>/round_0/finetune/export
"""

from __future__ import annotations

import argparse
import sys

from robusteval.training.data import split_of, ssl_positives
from robusteval.training.ssl import continuations, learned_replies

from robusteval import data, metrics
from robusteval.data.conversations import unmarked
from robusteval.metaeval import metaevaluate
from robusteval.types import Sample

SETS = ["conture-turn", "fed-turn", "dailydialog-zhao", "persona-zhao", "persona-usr", "usr-topicalchat"]
SPLIT = (0.1, 0.2)  # val, test: the harden configs'
LIMIT = 600  # the harden configs' pretrain.limit


def leaked(samples: list[Sample], name: str, seed: int, limit: int | None,
           part: str = "held-out") -> tuple[list[Sample], list[bool]]:
    """The ``part`` rows ("held-out": val + test, or "test") of ``seed``'s split and, per row,
    whether a train positive (all of them with ``limit`` None, else those drawn) holds its reply."""
    split = {s.id: split_of(name, s, *SPLIT, seed) for s in samples}
    rows = [s for s in samples if split[s.id] != "train" and (part == "held-out" or split[s.id] == part)]
    if limit is None:
        positives = continuations([s for s in samples if split[s.id] == "train"])
    else:
        positives = ssl_positives(name, samples, *SPLIT, seed, limit)["train"]
    return rows, learned_replies(rows, positives)


def spearman(metric, group: list[Sample]) -> str:
    e = metaevaluate(group, metric.score(group), aspects=["overall"], n_boot=1000, seed=0)["overall"]["spearman"]
    return f"{e['r']:.3f} [{e['ci95'][0]:.2f}, {e['ci95'][1]:.2f}] (n {len(group)})"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("exports", nargs="*", metavar="SEED=EXPORT", help="cross-encoder exports trained on the old split")
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    args = ap.parse_args(argv)
    print("| set | seed | held-out rows: by context → by conversation | reply in a train positive: by context "
          f"→ by conversation | among the positives drawn (limit {LIMIT}): by context → by conversation |")
    print("|---|---|---|---|---|")
    for name in SETS:
        marked = data.load(name)
        for seed in args.seeds:
            cells = []
            for limit in (None, LIMIT):
                (ho, lo), (hn, ln) = leaked(unmarked(marked), name, seed, limit), leaked(marked, name, seed, limit)
                cells.append(f"{sum(lo)} → {sum(ln)}")
            print(f"| {name} | {seed} | {len(ho)} → {len(hn)} | " + " | ".join(cells) + " |")
    if args.exports:
        old = unmarked(data.load("conture-turn"))
        print()
        print(f"| export (old split) | seed | ConTurE-turn test: all rows | reply pre-trained on (limit {LIMIT}) "
              "| the rest |")
        print("|---|---|---|---|---|")
        for spec in args.exports:
            seed_text, sep, export = spec.partition("=")
            if not sep or not seed_text.isdigit():
                ap.error(f"{spec!r}: give SEED=EXPORT")
            test, flags = leaked(old, "conture-turn", int(seed_text), LIMIT, part="test")
            metric = metrics.load("cross-encoder", checkpoint=export)
            cells = [spearman(metric, g) for g in (test, [s for s, f in zip(test, flags, strict=True) if f],
                                                   [s for s, f in zip(test, flags, strict=True) if not f])]
            print(f"| {export} | {seed_text} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
