"""What each adversarial round would have bought and cost, whether the validation gate kept it
or not: every given model export is attacked on the test contexts of a compare config's first
suite with all of the suite's attacks (the same samples, attacks, budget and criteria as
``robusteval compare``), and the per-family ASR (primary criterion, 95 % intervals), the R- /
R+ split and the model's recorded test Spearman (``fit.json`` beside the export) are printed
side by side. Attack logs go to ``--out-dir/<label>/results.jsonl`` (resumable).

    ROBUSTEVAL_DATA=../shared/data .venv/bin/python benchmarks/hardening_rounds.py \\
        --config configs/compare/dialogue.yaml --out-dir runs/hardening-rounds \\
        base=runs/.../training/base/finetune/export round1=runs/.../trained/round_1/model/export
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from rounds_setup import first_suite, parser

from robusteval import attacks, metrics
from robusteval.asr import asr_table, by_direction, overall
from robusteval.attacks.runner import run_attacks
from robusteval.compare.pipeline import SuiteData
from robusteval.stats import pct


def main(argv: list[str] | None = None) -> int:
    ap = parser(__doc__, base=False)
    ap.add_argument("models", nargs="+", help="label=export folder")
    args = ap.parse_args(argv)
    cfg, suite, _ = first_suite(args)
    sd = SuiteData(suite, cfg, None)
    tables, split, spearman = {}, {}, {}
    for item in args.models:
        label, _, export = item.partition("=")
        victim = metrics.load("cross-encoder", checkpoint=export)
        fresh = attacks.select(suite.attacks, cfg.seed, suite.attack_options)
        rows = list(run_attacks(sd.test, fresh, victim, Path(args.out_dir) / label / "results.jsonl",
                                resume=args.resume, budget=cfg.budget, dataset=suite.dataset, criteria=cfg.criteria))
        tables[label] = asr_table(rows)
        split[label] = {**by_direction(rows), "overall": overall(rows)}
        fit = Path(export).parent / "fit.json"
        spearman[label] = json.loads(fit.read_text())["test"] if fit.is_file() else {}
    labels = list(tables)
    fams = sorted({f for t in tables.values() for f in t})
    print(f"{suite.dataset}: {len(sd.test)} test contexts, {len(suite.attacks)} attack specs, budget {cfg.budget}")
    print("| family (direction) | " + " | ".join(labels) + " |")
    print("|---|" + "---|" * len(labels))
    for f in fams:
        cells = [f"{pct(t[f]['primary'])} ({t[f]['primary']['successes']}/{t[f]['primary']['n']})" if f in t else "–"
                 for t in tables.values()]
        print(f"| {f} | " + " | ".join(cells) + " |")
    for key, name in (("R-", "all R- (ASR)"), ("R+", "all R+ (invariance failures)"), ("overall", "overall")):
        print(f"| **{name}** | " + " | ".join(f"{pct(split[lb][key])} ({split[lb][key]['successes']}/"
                                              f"{split[lb][key]['n']})" for lb in labels) + " |")
    sets = sorted({k for s in spearman.values() for k in s if k.startswith("test_spearman")})
    print()
    print("| test Spearman | " + " | ".join(labels) + " |")
    print("|---|" + "---|" * len(labels))
    for k in sets:
        name = k.removeprefix("test_spearman/") if "/" in k else "mean"
        print(f"| {name} | " + " | ".join(f"{spearman[lb][k]:.3f}" if k in spearman[lb] else "–" for lb in labels)
              + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
