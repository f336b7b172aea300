"""Transfer vs guard-aware (adaptive) ASR against every guard policy (issue 14, item 6).

The attacks run once against the plain metric; their texts are then re-scored behind the guard
(*transfer*: the attacker did not know the guard) and the same attacks are rerun guard-aware
(:class:`robusteval.attacks.evasion.Evasive`: penalized search, disguised additions) with the
guard in the loop (*adaptive*). Per guard policy and attack family: the primary-criterion ASR of
both with 95 % intervals, their ratio (issue 14's target: adaptive <= 2x transfer), and how many
flagged texts the disguises got past the guard. The guard is the given detectors with the
shipped per-language default thresholds (what a user gets without a thresholds file) unless
``--thresholds`` names a calibrated file.

    ROBUSTEVAL_DATA=../shared/data .venv/bin/python benchmarks/adaptive_guard.py \\
        --out-dir runs/adaptive-guard [--limit 60] [--policies floor sanitize reject] [--resume]

Attack logs go to ``--out-dir/plain``, ``--out-dir/<policy>/{transfer,adaptive}`` (resumable).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from robusteval import attacks, data, detectors, metrics
from robusteval.asr import asr_table, by_direction
from robusteval.attacks.evasion import evasive, worth_rerunning
from robusteval.attacks.runner import run_attacks
from robusteval.compare.replay import replays
from robusteval.data.select import select
from robusteval.stats import pct

DETECTORS = ["nonalnum", {"name": "gec", "options": {"backend": "builtin"}}, "parse_triple", "perplexity",
             "context_copy", "speaker_tag", "generic", "judge_injection"]
ATTACKS = ["family:dialogue-rules", "textfooler-neg"]


def cell(entry: dict[str, Any] | None) -> str:
    if not entry:
        return "–"
    p = entry["primary"]
    return f"{pct(p)} ({p['successes']}/{p['n']})"


def ratio(transfer: dict[str, Any] | None, adaptive: dict[str, Any] | None) -> str:
    if not transfer or not adaptive:
        return "–"
    t, a = transfer["primary"]["asr"], adaptive["primary"]["asr"]
    if t is None or a is None:
        return "–"
    if t == 0:
        return "∞" if a > 0 else "1.00"
    return f"{a / t:.2f}"


def evasion_counts(rows: list[dict[str, Any]]) -> Counter[str]:
    out: Counter[str] = Counter()
    for r in rows:
        ev = (r.get("meta") or {}).get("evasion") or {}
        if ev.get("flagged_before"):
            out["flagged"] += 1
            out["evaded"] += bool(ev.get("evaded"))
            if ev.get("disguise"):
                out[str(ev["disguise"]).split(":")[0]] += 1
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--dataset", default="dailydialog-zhao")
    ap.add_argument("--limit", type=int, default=60, help="contexts (best-rated reply of each), in dataset order")
    ap.add_argument("--attacks", nargs="*", default=ATTACKS)
    ap.add_argument("--policies", nargs="*", default=["floor", "sanitize", "reject"])
    ap.add_argument("--thresholds", default=None, help="a calibrated thresholds file (default: shipped defaults)")
    ap.add_argument("--budget", type=int, default=60)
    ap.add_argument("--weight", type=float, default=10.0, help="evasion weight (score points per unit pressure)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--resume", action="store_true")
    args = ap.parse_args(argv)
    if not os.environ.get("ROBUSTEVAL_DATA"):
        print("set ROBUSTEVAL_DATA to the human-judgment data folder", file=sys.stderr)
        return 2
    out = Path(args.out_dir)
    samples = select(data.load(args.dataset, os.environ["ROBUSTEVAL_DATA"]), "best-per-context")[: args.limit]
    plain = metrics.load("bertscore", against="context")
    base_rows = list(run_attacks(samples, attacks.select(args.attacks, args.seed), plain,
                                 out / "plain" / "results.jsonl", resume=args.resume, budget=args.budget,
                                 dataset=args.dataset))
    dets = detectors.resolve(DETECTORS, args.thresholds)
    tables: dict[str, dict[str, Any]] = {"plain": asr_table(base_rows)}
    splits: dict[str, dict[str, Any]] = {"plain": by_direction(base_rows)}
    counts: dict[str, Counter[str]] = {}
    for policy in args.policies:
        guarded = detectors.guard(plain, dets, policy=policy, thresholds=args.thresholds)
        transfer = list(run_attacks(samples, replays(base_rows), guarded, out / policy / "transfer" / "results.jsonl",
                                    resume=args.resume, budget=args.budget, dataset=args.dataset))
        aware = evasive(worth_rerunning(attacks.select(args.attacks, args.seed)), weight=args.weight)
        adaptive = list(run_attacks(samples, aware, guarded, out / policy / "adaptive" / "results.jsonl",
                                    resume=args.resume, budget=args.budget, dataset=args.dataset))
        redone = {r["attack"] for r in adaptive}
        effective = [r for r in transfer if r["attack"] not in redone] + adaptive
        tables[f"{policy} transfer"], tables[f"{policy} adaptive"] = asr_table(transfer), asr_table(effective)
        splits[f"{policy} transfer"], splits[f"{policy} adaptive"] = by_direction(transfer), by_direction(effective)
        counts[policy] = evasion_counts(adaptive)
    print(f"{args.dataset}: {len(samples)} contexts; victim BERTScore (MiniLM) vs context; attacks {args.attacks}; "
          f"budget {args.budget}; guard: {len(dets)} detectors, "
          f"{'thresholds ' + args.thresholds if args.thresholds else 'shipped default thresholds'}; "
          f"evasion weight {args.weight}")
    print()
    fams = sorted({f for t in tables.values() for f in t})
    head = ["family (direction)", "plain"] + [f"{p} {k}" for p in args.policies for k in ("transfer", "adaptive")] \
        + [f"{p} adaptive / transfer" for p in args.policies]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for f in fams:
        cells = [cell(tables["plain"].get(f))]
        cells += [cell(tables[f"{p} {k}"].get(f)) for p in args.policies for k in ("transfer", "adaptive")]
        cells += [ratio(tables[f"{p} transfer"].get(f), tables[f"{p} adaptive"].get(f)) for p in args.policies]
        print(f"| {f} | " + " | ".join(cells) + " |")
    r_minus = ["**all R-**", cell({"primary": splits["plain"]["R-"]})]
    r_minus += [cell({"primary": splits[f"{p} {k}"]["R-"]}) for p in args.policies for k in ("transfer", "adaptive")]
    r_minus += [ratio({"primary": splits[f"{p} transfer"]["R-"]}, {"primary": splits[f"{p} adaptive"]["R-"]})
                for p in args.policies]
    print("| " + " | ".join(r_minus) + " |")
    print()
    print("| policy | adaptive R- texts flagged before disguise | disguised past the guard | disguises used |")
    print("|---|---|---|---|")
    for p in args.policies:
        c = counts[p]
        used = ", ".join(f"{k} {v}" for k, v in sorted(c.items()) if k not in ("flagged", "evaded")) or "–"
        print(f"| {p} | {c['flagged']} | {c['evaded']} | {used} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
