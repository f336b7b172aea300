"""Perplexity alone vs perplexity given the dialogue context, on real replies and rule attacks.

For each scoring mode of the ``perplexity`` detector (``context="none"``: the reply alone, as
version 1 scored it; ``context="auto"``: the reply's tokens after the conversation, version 2),
this script reads the well-rated (>= 4) DailyDialog-Zhao replies of one language:

* the calibration half (:func:`robusteval.detectors.clean.in_heldout` is False) fixes a
  threshold at the detector's share of the shipped 1 % budget (``--fpr``, default 1 % / 9);
* the held-out half is the clean side: its flag rate at that threshold is the false-positive
  rate, with an interval that resamples conversations (a context's replies together);
* every static dialogue-rule attack (Vasselli & Watanabe, Table 2) applied to the held-out
  replies is the attacked side: its ROC AUC against the held-out clean replies and its
  detection at the threshold.

The last figure of each attack row is its detection with the *shipped* default threshold of the
group (what ``guard(...)`` applies without a thresholds file; an entry calibrated for the other
mode does not apply, and the detector's class default 0.5 does). It also prints the largest
log-perplexity (nats) of the calibration half per mode, the number a threshold has to clear.
The middle figure uses this script's own threshold (not floored at the class default, unlike
the shipped ones), so the two modes are compared at the same clean budget.

    ROBUSTEVAL_DATA=../shared/data .venv/bin/python benchmarks/perplexity_context.py [--language english]
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time

import numpy as np
from robusteval.detectors.calibrate import threshold_for
from robusteval.detectors.clean import in_heldout, load_clean

from robusteval import attacks, detectors
from robusteval.compare.guarding import roc
from robusteval.compare.report_md import auc_cell
from robusteval.stats import flag_rate, pct
from robusteval.types import Sample


def replies(language: str, data_dir: str) -> list[Sample]:
    """The well-rated DailyDialog-Zhao replies in ``language`` (response and context translated)."""
    name = "dailydialog-good" if language == "english" else f"dailydialog-good:{language}"
    return load_clean(name, split="all", data_dir=data_dir)


def attacked(attack: attacks.Attack, clean: list[Sample]) -> list[Sample]:
    """``attack`` applied to each clean reply; replies it does not change are left out."""
    rule = attack.name
    out = []
    for s in clean:
        r = attack.run(s)
        if r.outcome == "attacked" and r.adversarial:
            out.append(Sample(id=f"{s.id}/{rule}", task=s.task, context=s.context, response=r.adversarial,
                              reference=s.reference, meta=s.meta))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--language", default="english", help="english or an xDial language (arabic, chinese, ...)")
    ap.add_argument("--fpr", type=float, default=0.01 / 9, help="the clean budget of the threshold (1 %% / 9)")
    ap.add_argument("--limit", type=int, default=None, help="clean replies per half (default: all)")
    args = ap.parse_args(argv)
    data_dir = os.environ.get("ROBUSTEVAL_DATA")
    if not data_dir:
        print("set ROBUSTEVAL_DATA to the human-judgment data folder", file=sys.stderr)
        return 2
    good = replies(args.language, data_dir)
    calibration = [s for s in good if not in_heldout(s)][:args.limit]
    heldout = [s for s in good if in_heldout(s)][:args.limit]
    adversarial = {a.name: attacked(a, heldout) for a in attacks.select("family:dialogue-rules", seed=0)}
    print(f"{args.language}: {len(calibration)} calibration and {len(heldout)} held-out well-rated replies; "
          f"threshold at {args.fpr:.4%} of the calibration half")
    modes = ("none", "auto")
    results: dict[str, dict[str, str]] = {}
    keys = [s.conversation_key() for s in heldout]  # replies of one context resample together
    for mode in modes:
        start = time.perf_counter()
        d = detectors.load("perplexity", context=mode)
        cal = d.detect(calibration)
        t = threshold_for(cal, args.fpr)
        clean = d.detect(heldout)
        worst = max(d.analyze(calibration), key=lambda r: r["perplexity"])["perplexity"]
        col = {"max clean ln ppl (calibration)": f"{math.log(worst):.2f}",
               "threshold": f"{t:.4f}" if t <= 1.0 else "never fires",
               "held-out FPR": pct(flag_rate(clean >= t, keys)),
               "held-out FPR with the shipped default": pct(flag_rate(d.flags(heldout), keys))}
        for rule, texts in adversarial.items():
            s = d.detect(texts) if texts else np.zeros(0)
            shipped = d.flags(texts) if texts else np.zeros(0, bool)
            own = [x.conversation_key() for x in texts]
            area = roc(clean, s, negative_clusters=keys, positive_clusters=own)
            col[f"{rule} (n={len(texts)}): AUC [95% CI] / detected / with the shipped default"] = (
                f"{auc_cell(area)} / {pct(flag_rate(s >= t, own))} / {pct(flag_rate(shipped, own))}"
                if area["auc"] is not None else "n/a")
        results[mode] = col
        print(f"[context={mode}] scored in {time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)
    print("\n| | context=none (v1) | context=auto (v2) |\n|---|---|---|")
    for key in results["none"]:
        print(f"| {key} | {results['none'][key]} | {results['auto'][key]} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
