"""``robusteval salient train``: train the salient-word tagger of the broken-sentence
attacker (Mu & Lim 2023) on SummEval (source, references) pairs; adapter-only output.

The first ``--train-docs`` documents train it, the rest validate it; use the output folder as
``broken-sentence`` / ``trigger-broken`` option ``classifier=`` with ``bag=predicted``.
"""

from __future__ import annotations

import argparse

from robusteval.cli.common import add_data_dir


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("salient", help="train the salient-word tagger (broken-sentence attack)",
                       description=__doc__)
    ssub = p.add_subparsers(dest="action", required=True)
    t = ssub.add_parser("train", help="train on SummEval and save adapter + head")
    t.add_argument("--out-dir", required=True)
    t.add_argument("--train-docs", type=int, default=80, help="documents used for training (default 80)")
    t.add_argument("--epochs", type=int, default=3)
    t.add_argument("--seed", type=int, default=0)
    add_data_dir(t)
    t.set_defaults(func=run_train)


def run_train(args: argparse.Namespace) -> int:
    from robusteval import data
    from robusteval.attacks.salient import SalientConfig, summeval_pairs, train_salient

    pairs = summeval_pairs(data.load("summeval", args.data_dir))
    train, val = pairs[: args.train_docs], pairs[args.train_docs:]
    metrics = train_salient(train, args.out_dir, SalientConfig(epochs=args.epochs, seed=args.seed), val)
    print(f"trained on {len(train)} documents, validated on {len(val)}: "
          + ", ".join(f"{k} {v:.4f}" for k, v in sorted(metrics.items())))
    print(f"wrote {args.out_dir}")
    return 0
