"""Is the base evaluator worth hardening? Spearman (95 % context-bootstrap interval) of a trained
cross-encoder export and of BERTScore against the dialogue context, on the *test split* of every
in-domain rated set (split by conversation exactly as training split it; ``--split-by context``
for an export trained by code before 47adb2f (2026-11-26), when splits hashed the exact
context) and on every zero-shot set, each with the set's own rated aspect. The issue-13
targets: mean in-domain test Spearman >= 0.35 over DailyDialog-Zhao and PersonaChat-Zhao, and
at least BERTScore's on every set. The learned - BERTScore column is the paired difference of
the two Spearmans on the same replies (both resampled by the same conversations): a "no" whose
interval lies below 0 is clearly below BERTScore, the others may be chance.

    ROBUSTEVAL_DATA=../shared/data .venv/bin/python benchmarks/base_evaluator.py \\
        runs/compare-dialogue/dailydialog/MiniLM-cross-encoder/training/base/finetune/export

Split settings default to configs/compare/dialogue.yaml's (seed 0, val 0.1, test 0.2).
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
from robusteval.training.data import parse_spec, split_of

from robusteval import data, metrics
from robusteval.data.conversations import unmarked
from robusteval.metaeval import fmt_change, metaevaluate, metaevaluate_change

IN_DOMAIN = ["dailydialog-zhao", "persona-zhao", "dailydialog-gupta", "conture-turn", "persona-usr:maintains_context"]
ZERO_SHOT = ["usr-topicalchat", "fed-turn", "dailydialog-grade:coherence", "convai2-grade:coherence",
             "empathetic-grade:coherence"]
TARGET_SETS = ("dailydialog-zhao", "persona-zhao")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("export", help="a cross-encoder export folder (scorer.json, head, adapter)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--val-fraction", type=float, default=0.1)
    ap.add_argument("--test-fraction", type=float, default=0.2)
    ap.add_argument("--n-boot", type=int, default=1000)
    ap.add_argument("--split-by", choices=("conversation", "context"), default="conversation",
                    help="the split the export was trained on: by conversation (since 2026-11-26) or context")
    args = ap.parse_args(argv)
    learned = metrics.load("cross-encoder", checkpoint=args.export)
    bert = metrics.load("bertscore", against="context")
    rows = []
    for role, specs in (("test split", IN_DOMAIN), ("zero-shot", ZERO_SHOT)):
        for spec in specs:
            name, aspect = parse_spec(spec)
            samples = data.load(name)
            if args.split_by == "context":
                samples = unmarked(samples)
            if role == "test split":
                samples = [s for s in samples
                           if split_of(name, s, args.val_fraction, args.test_fraction, args.seed) == "test"]
            r, ns, scores = {}, set(), {}
            for label, metric in (("learned", learned), ("bertscore", bert)):
                scores[label] = metric.score(samples)
                entry = metaevaluate(samples, scores[label], aspects=[aspect], n_boot=args.n_boot,
                                     seed=args.seed)[aspect]
                r[label] = entry["spearman"]
                ns.add(entry["n"])  # the rated replies correlated, not every loaded row
            # learned - BERTScore on the same replies, both resampled by the same conversations
            r["difference"] = metaevaluate_change(samples, scores["bertscore"], scores["learned"], aspect,
                                                  args.n_boot, args.seed)
            rows.append((name, role, "/".join(str(n) for n in sorted(ns)), aspect, r))
    print(f"export: {args.export}")
    print("| set | split | n | aspect | learned Spearman [95% CI] | BERTScore vs context [95% CI] "
          "| learned - BERTScore [paired 95% CI] | learned >= BERTScore |")
    print("|---|---|---|---|---|---|---|---|")
    def fmt(e: dict) -> str:
        return "n/a" if e["r"] is None else f"{e['r']:.3f} [{e['ci95'][0]:.2f}, {e['ci95'][1]:.2f}]"

    def beats(r: dict) -> bool:
        a, b = r["learned"]["r"], r["bertscore"]["r"]
        return a is not None and b is not None and a >= b

    def verdict(r: dict) -> str:
        """yes / **no** on the points; a "no" whose paired interval lies below 0 is clearly below."""
        ci = r["difference"].get("ci")
        return "yes" if beats(r) else "**no** (clearly)" if ci and ci[1] < 0 else "**no** (within the interval)"

    for name, role, n, aspect, r in rows:
        print(f"| {name} | {role} | {n} | {aspect} | {fmt(r['learned'])} | {fmt(r['bertscore'])} "
              f"| {fmt_change(r['difference'])} | {verdict(r)} |")
    target = [r["learned"]["r"] for name, role, _, _, r in rows if role == "test split" and name in TARGET_SETS]
    print(f"mean in-domain test Spearman (DailyDialog-Zhao, PersonaChat-Zhao): {np.mean(target):.3f} "
          "(target >= 0.35)")
    beaten = sum(beats(r) for *_, r in rows)
    print(f"sets where the learned evaluator >= BERTScore vs context: {beaten}/{len(rows)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
