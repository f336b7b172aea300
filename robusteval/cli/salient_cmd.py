"""``robusteval salient train``: train the salient-word tagger of the broken-sentence
attacker (Mu & Lim 2023) on SummEval (source, references) pairs; adapter-only output.

The first ``--train-docs`` documents train it, the rest validate it; use the output folder as
``broken-sentence`` / ``trigger-broken`` option ``classifier=`` with ``bag=predicted``.
"""

from __future__ import annotations

from robusteval.cli.common import Command
from robusteval.config.salient import SalientTrainConfig


def run_train(cfg: SalientTrainConfig) -> int:
    from robusteval.attacks.salient import SalientConfig, summeval_pairs, train_salient
    from robusteval.config.common import load_samples

    pairs = summeval_pairs(load_samples(cfg.dataset, data_dir=cfg.data_dir))
    train, val = pairs[: cfg.train_docs], pairs[cfg.train_docs:]
    metrics = train_salient(train, cfg.out_dir, SalientConfig(epochs=cfg.epochs, seed=cfg.seed), val,
                           accelerator=cfg.accelerator)
    print(f"trained on {len(train)} documents, validated on {len(val)}: "
          + ", ".join(f"{k} {v:.4f}" for k, v in sorted(metrics.items())))
    print(f"wrote {cfg.out_dir}")
    return 0


COMMANDS = [Command("salient train", "train on SummEval and save adapter + head", run_train, SalientTrainConfig,
                    __doc__)]
