"""Two evaluators attacked on the same test contexts, over several seeds: paired ASR changes
and Spearman per set (issue 13, "3 seeds, intervals").

Each ``--pair BEFORE AFTER`` names two ``robusteval harden`` run folders of the *same seed*
(the seed sets the split, so only runs of one seed share test contexts), or a harden folder and
any ``results.jsonl`` with rows of the same attacks on the same samples (a ``compare`` victim's
``plain/attacks``). Give one pair per seed.

Printed:

* per family (or per attack, ``--by attack``): each seed's successes / n on the rows both sides
  attacked, and the **paired change** in ASR (after - before) with a 95 % bootstrap interval over
  contexts and the exact sign test over contexts (fooled less / more, p), per seed and pooled
  over the seeds (each seed's contexts are their own clusters):
  :func:`robusteval.asr.paired_change`, the one home of this figure;
* Spearman with humans per test set and zero-shot set for each side and seed (harden folders
  only: the round's ``test`` figures in ``harden.json``), the change per set, its mean over
  seeds and the mean over sets.

A harden run is read at its base (round 0) unless ``--round chosen`` asks for the round its
gate kept. Two harden runs whose seed, split fractions or attacked dataset differ are refused:
their test contexts differ.

    python benchmarks/paired_bases.py --pair runs/harden-classic-seed1 runs/harden-master-keys-seed1 \\
        --pair runs/harden-classic-seed2 runs/harden-master-keys-seed2
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from robusteval.asr import attack_key, family_key, paired_change
from robusteval.attacks.base import ResultRow
from robusteval.attacks.runner import read_results
from robusteval.errors import DataFormatError

PAIRED_KEYS = (("seed",), ("data", "val_fraction"), ("data", "test_fraction"), ("attack", "dataset"))


def harden_doc(path: Path) -> dict[str, Any] | None:
    """A harden folder's ``harden.json`` (None for attack results)."""
    f = path / "harden.json"
    return json.loads(f.read_text(encoding="utf-8")) if f.is_file() else None


def round_of(doc: dict[str, Any], which: str) -> dict[str, Any]:
    """The base (round 0) or the chosen round of a ``harden.json``."""
    k = 0 if which == "base" else doc["chosen"]
    return next(r for r in doc["rounds"] if r["round"] == k)


def rows_of(path: Path, which: str) -> tuple[list[ResultRow], str]:
    """The test rows of a harden folder's base or chosen round (``test_round_<k>``), or of a
    results file / folder."""
    doc = harden_doc(path)
    if doc is not None:
        src = path / f"test_round_{round_of(doc, which)['round']}"
    elif (path.is_dir() and (path / "results.jsonl").is_file()) or path.is_file():
        src = path
    else:
        raise DataFormatError(path, "neither a finished harden run (harden.json) nor attack results")
    rows, _ = read_results(src)
    return rows, str(src)


def test_rows(rows: list[ResultRow], seed: int, val_fraction: float = 0.1, test_fraction: float = 0.2,
              data_dir: str | None = None, split_by: str = "conversation") -> list[ResultRow]:
    """The rows whose sample lies in the test split of ``seed``, split as training splits now
    (``split_by`` :data:`SPLIT_SCHEME`), by conversation as runs before 2026-11-28 did (the same
    split for a registered dataset; a dataset given as a path was salted by the path as written,
    which cannot be redone here, so it is refused), or by the exact context as every run of code
    before 47adb2f (2026-11-26) was."""
    from robusteval.training.data import SPLIT_SCHEME, same_split, split_of

    from robusteval import data
    from robusteval.data.conversations import unmarked

    by_dataset: dict[str, dict[str, Any]] = {}
    out = []
    for r in rows:
        if r.dataset is None:
            raise DataFormatError(r.sample_id, "the row does not name its dataset: cannot tell its split")
        if r.dataset not in by_dataset:
            by_dataset[r.dataset] = {s.id: s for s in data.load(r.dataset, data_dir)}
        sample = by_dataset[r.dataset].get(r.sample_id)
        if sample is None:
            raise DataFormatError(r.sample_id, f"not a sample of {r.dataset}")
        if split_by == "context":
            sample = unmarked([sample])[0]
        elif split_by != SPLIT_SCHEME and not same_split(split_by, [r.dataset]):
            raise SystemExit(f"{r.dataset}: split by {split_by!r}, which salted a dataset given as a path by the "
                             f"path as written; this code splits it by {SPLIT_SCHEME!r} and cannot redo the old split")
        if split_of(r.dataset, sample, val_fraction, test_fraction, seed) == "test":
            out.append(r)
    return out


def split_scheme(doc: dict[str, Any]) -> str:
    """How a harden run split its data, as the split it makes of its attacked dataset:
    ``harden.json`` says since 2026-11-26 (before, by context); "conversation" and
    "conversation/file-name" are one split of a registered dataset
    (:func:`robusteval.training.data.effective_scheme`)."""
    from robusteval.training.data import effective_scheme

    dataset = ((doc.get("config") or {}).get("attack") or {}).get("dataset")
    return effective_scheme(str(doc.get("split", "context")), [str(dataset)] if dataset else [])


def check_paired(before: Path, after: Path) -> None:
    """Two harden runs pair only when they share the split (seed and fractions) and the attacked
    dataset: otherwise their test contexts differ and a "paired" change would compare a few
    shared rows of different splits."""
    a, b = harden_doc(before), harden_doc(after)
    if a is None or b is None:
        return
    if split_scheme(a) != split_scheme(b):
        raise SystemExit(f"{before} and {after} do not pair: split by {split_scheme(a)!r} and by "
                         f"{split_scheme(b)!r} (runs on each side of a change of the split scheme)")
    for path in PAIRED_KEYS:
        va, vb = a.get("config"), b.get("config")
        for k in path:
            va, vb = (va or {}).get(k), (vb or {}).get(k)
        if va != vb:
            raise SystemExit(f"{before} and {after} do not pair: {'.'.join(path)} is {va!r} and {vb!r} "
                             "(runs of one seed, split and dataset only)")


def change_cell(entry: dict[str, Any]) -> str:
    c = entry["change"]
    if c["mean"] is None:
        return "n/a"
    if not entry["only_before"] and not entry["only_after"]:
        return "0 (no row changed)"  # a bootstrap of all-zero differences is a point, not an interval
    ci = "" if c["ci"] is None else f" [{100 * c['ci'][0]:+.1f}, {100 * c['ci'][1]:+.1f}]"
    t = entry["sign_test"]
    p = "n/a (no context moved on balance)" if t["p"] is None else f"{t['p']:.3g}"
    return f"{100 * c['mean']:+.1f}{ci}; {t['down']}↓ {t['up']}↑, p = {p}"


def asr_tables(pairs: list[tuple[list[ResultRow], list[ResultRow]]], labels: list[str], by: str) -> list[str]:
    key = attack_key if by == "attack" else family_key
    per_seed = [paired_change([p], key=key) for p in pairs]
    pooled = paired_change(pairs, key=key)
    head = "| " + by + " | " + " | ".join(f"{lab}: before → after (n)" for lab in labels) + \
           " | " + " | ".join(f"{lab}: change" for lab in labels) + " | pooled: before → after (n) | pooled change |"
    out = ["ASR on the rows both sides attacked (successes), and the paired change in points "
           "(after − before, 95 % bootstrap interval over contexts; then the exact sign test over contexts: "
           "contexts fooled less ↓ and more ↑, two-sided p. With few contexts the bootstrap excludes 0 too "
           "readily: a change is clear when p is small too):", "", head,
           "|" + "---|" * (2 + 2 * len(labels) + 1)]
    for group, entry in pooled.items():
        if not entry["n_pairs"]:
            continue  # named in the unmatched note below
        cells = []
        for seed in per_seed:
            e = seed.get(group)
            cells.append("–" if e is None or not e["n_pairs"] else f"{e['before']} → {e['after']} ({e['n_pairs']})")
        changes = ["–" if (e := seed.get(group)) is None or not e["n_pairs"] else change_cell(e) for seed in per_seed]
        out.append(f"| {group} | " + " | ".join(cells) + " | " + " | ".join(changes) +
                   f" | {entry['before']} → {entry['after']} ({entry['n_pairs']}) | **{change_cell(entry)}** |")
    unmatched = {g: e["unmatched"] for g, e in pooled.items() if e["unmatched"]}
    if unmatched:
        out += ["", "Rows only one side attacked (left out): " +
                ", ".join(f"{g} {k}" for g, k in unmatched.items()) + "."]
    return out


def spearman_table(sides: list[tuple[dict[str, Any] | None, dict[str, Any] | None]], labels: list[str]) -> list[str]:
    both = [(lab, b, a) for lab, (b, a) in zip(labels, sides, strict=True) if b is not None and a is not None]
    if not both:
        return ["(no harden.json on both sides of any pair: no Spearman table)"]
    sets = sorted({k.split("/", 1)[1] for _, b, _ in both for k in b["test"] if k.startswith("test_spearman/")})
    out = ["Spearman with humans on each seed's test split / zero-shot set (before → after), and the "
           "change averaged over seeds:", "",
           "| set | " + " | ".join(lab for lab, _, _ in both) + " | mean change |",
           "|" + "---|" * (len(both) + 2)]
    means: list[float] = []
    for s in [*sets, "(mean of sets)"]:
        key = "test_spearman" if s == "(mean of sets)" else f"test_spearman/{s}"
        cells, deltas = [], []
        for _, b, a in both:
            vb, va = b["test"].get(key), a["test"].get(key)
            if vb is None or va is None:
                cells.append("–")
                continue
            cells.append(f"{vb:.3f} → {va:.3f}")
            deltas.append(va - vb)
        d = float(np.mean(deltas)) if deltas else None
        if s != "(mean of sets)" and d is not None:
            means.append(d)
        out.append(f"| {s} | " + " | ".join(cells) + f" | {'n/a' if d is None else f'{d:+.3f}'} |")
    if means:
        worst = min(means)
        out += ["", f"Worst mean change over a set: {worst:+.3f}; sets whose mean change is below −0.02: "
                f"{sum(m < -0.02 for m in means)} of {len(means)}."]
    vals = [(lab, b.get("val_spearman"), a.get("val_spearman")) for lab, b, a in both]
    out += ["", "Validation Spearman (mean of the in-domain validation splits): " +
            "; ".join(f"{lab} {vb:.3f} → {va:.3f}" for lab, vb, va in vals if vb is not None and va is not None) + "."]
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pair", nargs=2, action="append", required=True, metavar=("BEFORE", "AFTER"),
                    help="two runs of one seed; repeat once per seed")
    ap.add_argument("--label", action="append", help="a name per pair, in order (default: pair 1, pair 2, ...)")
    ap.add_argument("--by", choices=("family", "attack"), default="family")
    ap.add_argument("--test-split-seeds", nargs="+", type=int, default=None, metavar="SEED",
                    help="keep only rows of samples in the test split (70 / 10 / 20) of each pair's "
                         "seed, one seed per pair: for results whose runs also attacked validation contexts "
                         "(benchmarks/judge_attacks.py's fitting samples)")
    from robusteval.training.data import SPLIT_SCHEME, effective_scheme

    ap.add_argument("--split-by", choices=(SPLIT_SCHEME, "conversation", "context"), default=SPLIT_SCHEME,
                    help=f"how --test-split-seeds splits: {SPLIT_SCHEME} as runs since 2026-11-28 do; conversation "
                         "as runs since 2026-11-26 did (the same split of a registered dataset); or by the exact "
                         "context, as runs before did (harden runs say which in harden.json)")
    ap.add_argument("--round", choices=("base", "chosen"), default="base",
                    help="which round of a harden run: its base (round 0, the default) or the round its gate chose")
    args = ap.parse_args(argv)
    labels = args.label or [f"pair {i + 1}" for i in range(len(args.pair))]
    if len(labels) != len(args.pair):
        ap.error(f"{len(labels)} --label for {len(args.pair)} --pair")
    if args.test_split_seeds is not None and len(args.test_split_seeds) != len(args.pair):
        ap.error(f"{len(args.test_split_seeds)} --test-split-seeds for {len(args.pair)} --pair")
    if args.test_split_seeds is not None and not os.environ.get("ROBUSTEVAL_DATA"):
        ap.error("--test-split-seeds reads each row's sample: set ROBUSTEVAL_DATA to the human-judgment data folder")
    pairs, sides = [], []
    for i, (lab, (before, after)) in enumerate(zip(labels, args.pair, strict=True)):
        check_paired(Path(before), Path(after))
        docs = harden_doc(Path(before)), harden_doc(Path(after))
        for doc in docs:
            dataset = (((doc or {}).get("config") or {}).get("attack") or {}).get("dataset")
            asked = effective_scheme(args.split_by, [str(dataset)] if dataset else [])
            if args.test_split_seeds is not None and doc is not None and split_scheme(doc) != asked:
                ap.error(f"a harden run of pair {lab!r} was split by {split_scheme(doc)!r}: "
                         f"pass --split-by {split_scheme(doc)}")
        (rb, sb), (ra, sa) = rows_of(Path(before), args.round), rows_of(Path(after), args.round)
        if args.test_split_seeds is not None:
            rb, ra = (test_rows(rows, args.test_split_seeds[i], split_by=args.split_by) for rows in (rb, ra))
        print(f"{lab}: before {sb} ({len(rb)} rows), after {sa} ({len(ra)} rows)")
        pairs.append((rb, ra))
        sides.append(tuple(None if d is None else round_of(d, args.round) for d in docs))
    print()
    print(f"Harden runs read at their {'base (round 0)' if args.round == 'base' else 'chosen round'}.")
    print("\n".join(asr_tables(pairs, labels, args.by)))
    print()
    print("\n".join(spearman_table(sides, labels)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
