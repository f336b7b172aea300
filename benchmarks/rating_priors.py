"""What the rated train splits reward: the human ratings a dialogue evaluator is fine-tuned on,
for short, exclamatory and question replies against all replies (issues 13 and 14).

A learned evaluator imitates its training ratings. If people who rated these sets gave short or
enthusiastic replies more than the average reply, the fine-tuned cross-encoder will too, and a
generic reply such as Vasselli & Watanabe's "fantastic! how are you?" (their Table 2) will beat
the best human reply for reasons the ratings themselves teach. This script measures that prior
on the exact data the base is fine-tuned on: the train split (by conversation, the harden configs'
split settings) of each rated in-domain set, each rating normalized to [0, 1] with the set's
scale (:func:`robusteval.training.data.normalized`, what training uses).

Per set: the mean normalized rating of all rated replies, and of three groups -- replies of at
most three words, replies with an exclamation mark, replies that end with a question mark --
with the difference from the set's mean and its 95 % interval (a bootstrap over conversations of
the per-reply difference from the set mean, :func:`robusteval.stats.mean_ci`).

    ROBUSTEVAL_DATA=../shared/data .venv/bin/python benchmarks/rating_priors.py [--seed 0] [--split train]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

import numpy as np
from robusteval.training.data import normalized, parse_spec, split_of

from robusteval import data
from robusteval.stats import mean_ci
from robusteval.text import words
from robusteval.types import Sample

IN_DOMAIN = ("dailydialog-zhao", "persona-zhao", "dailydialog-gupta", "conture-turn", "persona-usr:maintains_context")

GROUPS: dict[str, Callable[[str], bool]] = {
    "at most 3 words": lambda t: 0 < len(words(t)) <= 3,
    "with '!'": lambda t: "!" in t or "！" in t,
    "ending in '?'": lambda t: t.rstrip().endswith(("?", "？", "؟")),
}


def group_rows(samples: Sequence[Sample], aspect: str) -> tuple[list[float], list[str], list[str]]:
    """The normalized ratings, context keys and responses of the rated samples."""
    ys, ctx, texts = [], [], []
    for s in samples:
        y = normalized(s, aspect)
        if y is None:
            continue
        ys.append(y)
        ctx.append(s.conversation_key())
        texts.append(s.response)
    return ys, ctx, texts


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--val-fraction", type=float, default=0.1)
    ap.add_argument("--test-fraction", type=float, default=0.2)
    ap.add_argument("--split", choices=("train", "val", "test", "all"), default="train")
    ap.add_argument("--datasets", nargs="+", default=list(IN_DOMAIN))
    args = ap.parse_args(argv)
    print(f"split: {args.split} (seed {args.seed}, val {args.val_fraction}, test {args.test_fraction}); "
          "mean normalized rating [0, 1]; per group: n, mean, difference from the set's mean [95 % CI]")
    print()
    print("| set | n | mean | " + " | ".join(GROUPS) + " |")
    print("|---|---|---|" + "---|" * len(GROUPS))
    for spec in args.datasets:
        name, aspect = parse_spec(spec)
        samples = data.load(name)
        if args.split != "all":
            samples = [s for s in samples
                       if split_of(name, s, args.val_fraction, args.test_fraction, args.seed) == args.split]
        ys, ctx, texts = group_rows(samples, aspect)
        if not ys:
            print(f"| {name} | 0 | – |" + " – |" * len(GROUPS))
            continue
        mean = float(np.mean(ys))
        cells = []
        for test in GROUPS.values():
            idx = [i for i, t in enumerate(texts) if test(t)]
            if not idx:
                cells.append("0")
                continue
            d = mean_ci([ys[i] - mean for i in idx], [ctx[i] for i in idx])
            ci = "" if d["ci"] is None else f" [{d['ci'][0]:+.2f}, {d['ci'][1]:+.2f}]"
            cells.append(f"{len(idx)}: {mean + d['mean']:.2f} ({d['mean']:+.2f}{ci})")
        print(f"| {name} ({aspect}) | {len(ys)} | {mean:.2f} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
