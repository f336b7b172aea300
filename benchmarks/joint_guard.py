"""The learned joint guard against per-detector thresholds, leave one attack family out.

Clean text: the calibration / held-out halves of SummEval references, well-rated
DailyDialog-Zhao replies and USR ground truth (``robusteval.detectors.clean``). Adversarial
text: the changed texts of attack-runner result folders (``--attack-results``, repeatable).
For each attack family the joint guard (``robusteval.detectors.joint``) is fitted without it,
calibrated to ``--target-fpr`` on the clean calibration half -- its threshold read in-sample
and cross-fitted by conversation, both reported, and with ``--confidence`` a third, cross-fitted
with the FPR's upper bound held to the target (``threshold_for``) -- and tested on it; the
per-detector guard (every detector at target / k, calibrated on the same half, bounded too with
``--confidence``, at 1 - (1 - confidence) / k each) is the baseline.
Every rate has its 95 % interval, resampling conversations (a clean set's document or context,
an attacked text's dataset and context), Wilson's where each conversation has one text.

    ROBUSTEVAL_DATA=../shared/data .venv/bin/python benchmarks/joint_guard.py \\
        --attack-results runs/ss-attacks/summary --attack-results runs/ss-attacks/dialogue \\
        [--confidence 0.95] [--save runs/joint.json]
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np
from robusteval.detectors import joint
from robusteval.detectors.calibrate import adversarial_samples, per_detector_confidence, threshold_for
from robusteval.detectors.clean import load_clean

from robusteval import data, detectors
from robusteval.attacks.runner import read_results
from robusteval.stats import flag_rate, pct, scoped

CLEAN = ("summeval-references", "dailydialog-good", "usr-topicalchat-ground-truth")
OPTIONS = {"gec": {"backend": "builtin"}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--attack-results", action="append", required=True)
    ap.add_argument("--target-fpr", type=float, default=0.01)
    ap.add_argument("--confidence", type=float, default=None,
                    help="also bound each FPR at this confidence (Clopper-Pearson), e.g. 0.95")
    ap.add_argument("--detectors", nargs="*", default=None, help="default: every listed detector")
    ap.add_argument("--save", help="write the joint model fitted on every family here (JSON)")
    args = ap.parse_args(argv)
    root = os.environ.get("ROBUSTEVAL_DATA")
    if not root:
        print("set ROBUSTEVAL_DATA to the human-judgment data folder", file=sys.stderr)
        return 2
    names = args.detectors or detectors.names()
    dets = [detectors.load(n, **OPTIONS.get(n, {})) for n in names]
    sigs = [d.identity() for d in dets]
    cal_sets = {c: load_clean(c, "calibration", root) for c in CLEAN}
    cal = [s for c in CLEAN for s in cal_sets[c]]
    cal_keys = [scoped(c, s.conversation_key()) for c in CLEAN for s in cal_sets[c]]
    held_sets = {c: load_clean(c, "heldout", root) for c in CLEAN}
    held = [s for c in CLEAN for s in held_sets[c]]
    held_keys = [scoped(c, s.conversation_key()) for c in CLEAN for s in held_sets[c]]
    attacked, attacked_keys = [], []
    for path in args.attack_results:
        rows, dataset = read_results(path)
        by_id = {s.id: s for s in data.load(dataset, root)}
        pairs = adversarial_samples(rows, by_id, dataset)
        attacked += pairs
        attacked_keys += [scoped(dataset, s.conversation_key()) for _, s in pairs]
    families: dict[str, list[int]] = {}
    for i, (row, _) in enumerate(attacked):
        families.setdefault(f"{row['family']} ({row['direction']})", []).append(i)
    keys_of = {f: [attacked_keys[i] for i in idx] for f, idx in families.items()}
    x_cal, x_held = joint.features_of(dets, cal), joint.features_of(dets, held)
    x_adv = joint.features_of(dets, [s for _, s in attacked])
    per = args.target_fpr / len(dets)
    conf = per_detector_confidence(dets, args.confidence, combined=True)  # the union's bound at --confidence
    thr = np.array([threshold_for(x_cal[:, k], per, conf) for k in range(len(dets))])
    by_family = {f: x_adv[idx] for f, idx in families.items()}
    # the joint guard's threshold read in-sample (the fitted model's scores on its own clean
    # texts) and cross-fitted (out-of-fold scores, folds by conversation): same features, same fits
    lofo = {"in-sample": joint.leave_one_family_out(x_cal, x_held, by_family, args.target_fpr, names, sigs,
                                                    held_keys, keys_of),
            "cross-fitted": joint.leave_one_family_out(x_cal, x_held, by_family, args.target_fpr, names, sigs,
                                                       held_keys, keys_of, cal_clusters=cal_keys)}
    if args.confidence is not None:
        lofo[f"bounded at {args.confidence:g}"] = joint.leave_one_family_out(
            x_cal, x_held, by_family, args.target_fpr, names, sigs, held_keys, keys_of, cal_clusters=cal_keys,
            confidence=args.confidence)
    print(f"clean: {len(cal)} calibration texts ({len(set(cal_keys))} conversations), {len(held)} held-out texts; "
          f"{len(attacked)} adversarial texts; target FPR {100 * args.target_fpr:g} %")
    bounded = "" if args.confidence is None else f", bounded at {args.confidence:g}"
    print(f"per-detector guard{bounded} FPR on the held-out half: "
          f"{pct(flag_rate((x_held >= thr).any(axis=1), held_keys))}\n")
    print(f"| family (held out of the joint fit) | n | per-detector guard (target / k{bounded}) | " + " | ".join(
        f"joint, {how} threshold: detection | its FPR (held-out clean)" for how in lofo) + " |")
    print("|---|---|---|" + "---|---|" * len(lofo))
    for f, idx in sorted(families.items()):
        base = flag_rate((x_adv[idx] >= thr).any(axis=1), keys_of[f])
        cells = []
        for how in lofo:
            j = lofo[how].get(f)
            cells += [pct(j["detection"]), pct(j["fpr"])] if j else ["n/a", "n/a"]
        print(f"| {f} | {len(idx)} | {pct(base)} | " + " | ".join(cells) + " |")
    print(f"\nthresholds ({' / '.join(lofo)}): " + ", ".join(
        f"{f} " + " / ".join(f"{lofo[how][f]['threshold']:.4f}" for how in lofo) for f in sorted(lofo["cross-fitted"])))
    if args.save:
        params = joint.fit(np.concatenate([x_cal, x_adv]), np.r_[np.zeros(len(x_cal)), np.ones(len(x_adv))],
                           x_cal, args.target_fpr, names, sigs, clean_groups=cal_keys, confidence=args.confidence)
        joint.save(params, args.save)
        print(f"\nwrote {args.save}: coefficients " + ", ".join(
            f"{n} {c:+.2f}" for n, c in zip(names, params["coef"], strict=True)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
