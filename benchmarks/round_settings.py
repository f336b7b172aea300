"""Round settings, chosen on validation only: one adversarial round from a trained base per
variant of a compare config's ``rounds:`` block (each variant overrides some of its keys),
through the same loop and gate as ``robusteval compare`` (:func:`adversarial_rounds`). Prints
each variant's validation Spearman, validation ASR, objective and whether the gate would keep
it. The base is attacked once on the train and validation contexts and shared by all variants;
test contexts are never touched.

    ROBUSTEVAL_DATA=../shared/data .venv/bin/python benchmarks/round_settings.py \\
        --config configs/compare/dialogue.yaml --base <base export> --out-dir runs/round-settings \\
        'light={"margin_weight": 0.3, "replay": 1.0}' 'few={"train_limit": 10}'
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

from robusteval.training.rounds import adversarial_rounds, measure
from rounds_setup import first_suite, parser

from robusteval.compare.learned import data_args, training_attacks, variant_settings
from robusteval.compare.pipeline import SuiteData
from robusteval.stats import pct


def main(argv: list[str] | None = None) -> int:
    ap = parser(__doc__, base=True)
    ap.add_argument("variants", nargs="+", help='label={"key": value, ...} overriding the rounds block')
    args = ap.parse_args(argv)
    cfg, suite, train = first_suite(args)
    if train is None:
        raise SystemExit(f"{args.config}: the first suite has no learned victim (train: block)")
    sd = SuiteData(suite, cfg, None)
    dargs = data_args(train, suite, cfg, None)
    out = Path(args.out_dir)
    base = measure(out / "base", train.module, args.base, train.model, dargs, args.resume)
    train_attacks = training_attacks(train, suite, cfg, suite.attacks)
    reuse: dict[str, object] = {}
    rows = []
    for item in args.variants:
        label, _, raw = item.partition("=")
        overrides = json.loads(raw or "{}")
        model, spec = variant_settings(replace(train, rounds={**train.rounds, **overrides, "rounds": 1}))
        result = adversarial_rounds(out / label, kind=train.module, model_args=model, data_args=dargs, base=base,
                                    train_pool=sd.train, val_pool=sd.val, attacks=train_attacks, spec=spec,
                                    budget=cfg.budget, dataset=suite.dataset, criteria=cfg.criteria,
                                    resume=args.resume, reuse=reuse)
        rows.append((label, overrides, result["rounds"]))
    print("| variant | overrides | examples added | val Spearman (base) | val ASR (base) | objective | within "
          "tolerance | kept |")
    print("|---|---|---|---|---|---|---|---|")
    for label, overrides, records in rows:
        b, r = records
        print(f"| {label} | `{json.dumps(overrides)}` | {r['added']} "
              f"| {r['val_spearman']:.3f} ({b['val_spearman']:.3f}) "
              f"| {pct(r['val_asr_detail'])} ({pct(b['val_asr_detail'])}) | {r['objective']:.3f} "
              f"| {'yes' if r['valid'] else 'no'} | {'yes' if r['kept'] else 'no'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
