"""The split leak that splitting by conversation closed (BENCHMARKS §11, "The split leak").

Part 1, for each rated set and seed: held-out (val + test) rated rows whose reply pre-training
learns right after its own preceding turns (:func:`robusteval.training.ssl.learned_replies`),
split by the exact context as every run before 2026-11-26 was, and by conversation as now.

Part 2, for each export given (``SEED=EXPORT``, trained on the old split): its Spearman on the
ConTurE-turn test split of that seed, on all rows, on the rows whose reply it pre-trained on,
and on the rest: did the leak inflate the tables?

    ROBUSTEVAL_DATA=../shared/data .venv/bin/python benchmarks/split_leak.py \\
        0=runs/<seed-0 run>/round_0/finetune/export 1=runs/<seed-1 run>/round_0/finetune/export
"""

from __future__ import annotations

import argparse
import sys

from robusteval.training.data import split_of
from robusteval.training.ssl import learned_replies

from robusteval import data, metrics
from robusteval.data.conversations import unmarked
from robusteval.metaeval import metaevaluate
from robusteval.types import Sample

SETS = ["conture-turn", "fed-turn", "dailydialog-zhao", "persona-zhao", "persona-usr", "usr-topicalchat"]
SPLIT = (0.1, 0.2)  # val, test: the harden configs'


def leaked(samples: list[Sample], name: str, seed: int) -> tuple[list[Sample], list[bool]]:
    """The held-out rows of ``seed``'s split of ``samples`` and, per row, whether its reply is learned."""
    part = {s.id: split_of(name, s, *SPLIT, seed) for s in samples}
    held = [s for s in samples if part[s.id] != "train"]
    return held, learned_replies(held, [s for s in samples if part[s.id] == "train"])


def spearman(metric, group: list[Sample]) -> str:
    e = metaevaluate(group, metric.score(group), aspects=["overall"], n_boot=1000, seed=0)["overall"]["spearman"]
    return f"{e['r']:.3f} [{e['ci95'][0]:.2f}, {e['ci95'][1]:.2f}] (n {len(group)})"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("exports", nargs="*", metavar="SEED=EXPORT", help="cross-encoder exports trained on the old split")
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    args = ap.parse_args(argv)
    print("| set | seed | held-out rows: by context → by conversation "
          "| reply pre-trained on: by context → by conversation |")
    print("|---|---|---|---|")
    for name in SETS:
        marked = data.load(name)
        for seed in args.seeds:
            (ho, lo), (hn, ln) = leaked(unmarked(marked), name, seed), leaked(marked, name, seed)
            print(f"| {name} | {seed} | {len(ho)} → {len(hn)} | {sum(lo)} → {sum(ln)} |")
    if args.exports:
        old = unmarked(data.load("conture-turn"))
        print()
        print("| export (old split) | seed | ConTurE-turn test: all rows | reply pre-trained on | the rest |")
        print("|---|---|---|---|---|")
        for spec in args.exports:
            seed_text, sep, export = spec.partition("=")
            if not sep or not seed_text.isdigit():
                ap.error(f"{spec!r}: give SEED=EXPORT")
            seed = int(seed_text)
            part = {s.id: split_of("conture-turn", s, *SPLIT, seed) for s in old}
            test = [s for s in old if part[s.id] == "test"]
            flags = learned_replies(test, [s for s in old if part[s.id] == "train"])
            metric = metrics.load("cross-encoder", checkpoint=export)
            cells = [spearman(metric, g) for g in (test, [s for s, f in zip(test, flags, strict=True) if f],
                                                   [s for s, f in zip(test, flags, strict=True) if not f])]
            print(f"| {export} | {seed} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
