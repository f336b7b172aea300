"""Null rounds: a compare config's adversarial-round settings (epochs, lr, replay, round-only
losses) applied to a trained base with *no* adversarial examples, once with the embedding
adversary as configured and once without. The validation and test Spearman of these rounds,
beside the base's, separate the validity cost of further training from that of the
adversarial data (BENCHMARKS §11).

    ROBUSTEVAL_DATA=../shared/data .venv/bin/python benchmarks/null_rounds.py \\
        --config configs/compare/dialogue.yaml --base <base export> --out-dir runs/null-rounds
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from robusteval.training.rounds import fit

from robusteval.cli.common import load_config
from robusteval.compare.config import parse
from robusteval.compare.learned import data_args, variant_settings


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", required=True)
    ap.add_argument("--base", required=True, help="the trained base export")
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--resume", action="store_true")
    args = ap.parse_args(argv)
    cfg = parse(load_config(args.config))
    suite = cfg.suites[0]
    train = next(v.train for v in suite.victims if v.train is not None)
    dargs = data_args(train, suite, cfg, None)
    model, spec = variant_settings(train)
    for label, extra in (("null-embed", {}), ("null-plain", {"embed_adv_weight": 0.0})):
        f = fit(Path(args.out_dir) / label, train.module, {**model, **extra}, {**dargs, "human_share": spec.replay},
                spec.epochs, args.base, resume=args.resume)
        print(label, json.dumps({"val_spearman": f.val.get("val_spearman"), "test": f.test}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
