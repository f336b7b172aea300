"""Null rounds: a compare config's adversarial-round settings (epochs, lr, replay, round-only
losses) applied to a trained base with *no* adversarial examples, once with the embedding
adversary as configured and once without. The validation and test Spearman of these rounds,
beside the base's, separate the validity cost of further training from that of the
adversarial data (BENCHMARKS §11).

    ROBUSTEVAL_DATA=../shared/data .venv/bin/python benchmarks/null_rounds.py \\
        --config configs/compare/dialogue.yaml --base <base export> --out-dir runs/null-rounds
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from robusteval.training.rounds import fit
from rounds_setup import first_suite, parser

from robusteval.compare.learned import data_args, variant_settings


def main(argv: list[str] | None = None) -> int:
    args = parser(__doc__, base=True).parse_args(argv)
    cfg, suite, train = first_suite(args)
    if train is None:
        raise SystemExit(f"{args.config}: the first suite has no learned victim (train: block)")
    dargs = data_args(train, suite, cfg, None)
    model, spec = variant_settings(train)
    for label, extra in (("null-embed", {}), ("null-plain", {"embed_adv_weight": 0.0})):
        f = fit(Path(args.out_dir) / label, train.module, {**model, **extra}, {**dargs, "human_share": spec.replay},
                spec.epochs, args.base, resume=args.resume)
        print(label, json.dumps({"val_spearman": f.val.get("val_spearman"), "test": f.test}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
