"""What ``source_support`` finds, by kind, on clean text and on attack texts (BENCHMARKS §9).

Its suspicion counts four kinds of finding (``unsupported`` names / numbers, ``substitutions``,
``negation_flips`` and, since v3, ``edits`` of a near-copy). A per-detector threshold says
little about *why* an attack is or is not caught; this prints, for the held-out half of a clean
set and for every attack of the given result folders, the share of texts with at least one
finding of each kind (95 % intervals, :func:`robusteval.stats.flag_rate`, resampling
conversations: a document's references, a context's attacked replies), so a change to the
detector can be read as "finds more swaps" and "reads fewer clean texts as swapped" separately.

    ROBUSTEVAL_DATA=../shared/data .venv/bin/python benchmarks/source_support_findings.py \\
        --attack-results runs/attack-detectors/summary [--clean summeval-references] \\
        [--option close_min=0.9] [--thresholds runs/ss-guard/thresholds.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np
from robusteval.detectors.calibrate import adversarial_samples
from robusteval.detectors.clean import load_clean

from robusteval import data, detectors
from robusteval.attacks.runner import read_results
from robusteval.stats import flag_rate, pct
from robusteval.types import Sample

KINDS = ("substitutions", "negation_flips", "unsupported", "edits")


def cells(rows: list[dict], samples: list[Sample], threshold: float | None = None) -> list[str]:
    """The row's n -- the judged (not abstained) texts, the denominator of every share, with
    the abstentions named -- then one cell per kind: the share of judged texts with a finding
    of it, resampling the samples' conversations; with a ``threshold``, last the share flagged
    at it (suspicion >= threshold, as the guard flags; over the judged texts too)."""
    judged = [(r, s.conversation_key()) for r, s in zip(rows, samples, strict=True) if not r.get("abstained")]
    n = f"{len(judged)}" + (f" ({len(rows) - len(judged)} abstained)" if len(judged) < len(rows) else "")
    width = len(KINDS) + (threshold is not None)
    if not judged:
        return [n] + ["n/a"] * width
    keys = [k for _, k in judged]
    found = [np.array([bool(r.get(k)) for r, _ in judged]) for k in KINDS]
    if threshold is not None:
        found.append(np.array([r["suspicion"] >= threshold for r, _ in judged]))
    return [n] + [pct(flag_rate(f, keys)) for f in found]


def read_threshold(path: str, det: detectors.Detector) -> float:
    """source_support's threshold in a thresholds file (``guard calibrate`` without
    ``--by-group``: one threshold for every text), refused when the file has none, has one per
    group (the guard would pick a group's for each text; this column would not be what it
    flags), or was calibrated for another version or other settings of the detector."""
    thresholds = json.loads(Path(path).read_text(encoding="utf-8"))
    if "groups" in thresholds:
        raise SystemExit(f"{path}: per-group thresholds; give a file from `guard calibrate` without --by-group")
    entry = thresholds.get("detectors", {}).get("source_support")
    if entry is None:
        raise SystemExit(f"{path}: no source_support threshold in it")
    if entry["signature"] != det.identity():
        raise SystemExit(f"{path}: source_support was calibrated as {entry['signature']!r}, "
                         f"this detector is {det.identity()!r}")
    return float(entry["threshold"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--attack-results", action="append", required=True)
    ap.add_argument("--clean", default="summeval-references", help="a clean set; its held-out half is used")
    ap.add_argument("--family", action="append", default=None,
                    help="only these attack families (default: closed-ended, aspect, word-search)")
    ap.add_argument("--option", action="append", default=[], help="detector option NAME=FLOAT (repeatable)")
    ap.add_argument("--thresholds", help="a thresholds file with source_support in it: adds the share flagged at it")
    args = ap.parse_args(argv)
    root = os.environ.get("ROBUSTEVAL_DATA")
    if not root:
        print("set ROBUSTEVAL_DATA to the human-judgment data folder", file=sys.stderr)
        return 2
    options = {k: float(v) for k, _, v in (o.partition("=") for o in args.option)}
    det = detectors.load("source_support", **options)
    families = set(args.family or ("closed-ended", "aspect", "word-search"))
    clean = load_clean(args.clean, "heldout", root)
    by_attack: dict[str, list] = {}
    for path in args.attack_results:
        rows, dataset = read_results(path)
        by_id = {s.id: s for s in data.load(dataset, root)}
        for row, sample in adversarial_samples(rows, by_id, dataset):
            if row["family"] in families:
                by_attack.setdefault(f"{row['attack']} ({dataset})", []).append(sample)
    threshold = read_threshold(args.thresholds, det) if args.thresholds else None
    print(f"source_support {det.identity()}" + (f", threshold {threshold:.4f}" if threshold is not None else "") + "\n")
    head = ["texts", "n", "with a substitution", "with a negation flip", "with an unsupported name / number",
            "with an edit in a near-copy"] + (["flagged at the threshold"] if threshold is not None else [])
    print("| " + " | ".join(head) + " |\n|" + "---|" * len(head))
    print(f"| {args.clean} (clean, held-out) | " + " | ".join(cells(det.analyze(clean), clean, threshold)) + " |")
    for name, samples in sorted(by_attack.items()):
        print(f"| {name} | " + " | ".join(cells(det.analyze(samples), samples, threshold)) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
