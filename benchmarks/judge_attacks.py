"""LLM judges under the issue-16 attacks: ASR per family for a plain judge, the isolated judge,
an isolated committee and a guarded isolated judge; validity (Spearman with people) of each;
universal-phrase transfer.

The judge is the local SmolLM2-135M-Instruct (the only LLM here) with the G-Eval 1-5 rubric
for overall quality (Liu et al. 2023; the rubric text is Hu et al. 2024's "Gold" definition),
probability-weighted (``mode=prob``): SmolLM2 rarely writes a parseable verdict (it echoes the
prompt), so a parse-mode judge scores most texts at the fallback midpoint and its "ASR" would
measure ties. Variants:

* ``plain`` -- ``isolation=False`` (the prompt as before issue 16);
* ``isolation`` -- the default: untrusted text in nonce-delimited spans, verdict markers in
  it neutralized, the last verdict parsed;
* ``committee`` -- ``committee`` of three isolated members, the same rubric worded three ways
  (Hu et al.'s "Gold", "Detailed" and "Simplified" definitions of overall quality), median
  score, abstaining (score 0) when the members' range reaches ``--threshold`` points. One
  LLM, three rubrics (SmolLM2 is the only LLM here);
* ``guarded`` -- the isolated judge behind the guard of ``configs/compare/judges.yaml``
  (``nonalnum``, ``speaker_tag``, ``generic``, ``judge_injection``) with the package's shipped
  per-task, per-language thresholds and policy ``floor`` (a flagged text scores 0);
* ``mixed`` -- a committee of three different models, the closest this machine comes to the
  literature's multi-model juries: the isolated SmolLM2 judge, a trained MiniLM cross-encoder
  (``--cross-encoder``) and BERTScore against the context, each put on one scale by
  ``normalize="quantile"`` (calibrated on ``--calibration-size`` well-rated replies of
  validation contexts), median score (no abstention: an abstained original would score 0
  and hand every attack text a win). Dialogue only; use ``--split test`` so the cross-encoder
  is attacked on contexts it was not trained on;
* ``cross-encoder`` -- the trained cross-encoder of ``--cross-encoder`` alone (dialogue only,
  ``--split test``): the mixed committee's learned member under the same attacks.

Attacks (R-, ``beats_reference``): ``judge-master-keys``, ``judge-master-keys-prefix``,
``null-model``, ``judge-universal-phrase``, ``judge-injection-search`` and its ``-ppl`` form, on
the first ``--limit`` contexts of each dataset (the best-rated reply of each; fitting samples
are left out of the ASR by the runner). *Transfer*: the phrase fitted against ``plain`` is
appended unchanged for the other variants (``judge-universal-phrase`` with ``phrase=``).

``--transfer VARIANT...`` (used for the committee, whose every query costs three judge calls):
for those variants the two searches (``judge-universal-phrase``, the injection searches) are
not rerun against them; the texts they found against ``plain`` are re-scored instead
(transfer), while the static families still run against the variant itself.

Validity: Spearman of each variant with the human ratings on the first ``--corr-limit`` rated
replies of SummEval (relevance, coherence, consistency, fluency: the mean of the four) and USR
Topical-Chat (overall), context-bootstrap intervals; each variant's change from plain has a
paired interval (both sides resampled by the same conversations). With ``--split test``, a set the §11
cross-encoder trained on (``TRAINED_ON``) gives its test split's rated replies only.

    ROBUSTEVAL_DATA=../shared/data .venv/bin/python benchmarks/judge_attacks.py --out-dir runs/judge-attacks \\
        [--limit 20] [--corr-limit 60] [--datasets dailydialog-zhao summeval] [--resume]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from robusteval.training.data import SPLIT_SCHEME, same_split, split_of

from robusteval import attacks, data, metrics
from robusteval.asr import asr_table
from robusteval.attacks.judge import TransferredPhrase
from robusteval.attacks.runner import read_results, run_attacks
from robusteval.compare.replay import replays
from robusteval.data.select import select
from robusteval.metaeval import correlate, correlation_change, fmt_change, fmt_r
from robusteval.stats import pct
from robusteval.types import Sample

SEARCHES = {"judge-universal-phrase", "judge-injection-search", "judge-injection-search-ppl"}
FAMILIES = ["judge-master-keys", "judge-master-keys-prefix", "null-model", "judge-universal-phrase",
            "judge-injection-search", "judge-injection-search-ppl"]
VARIANTS = ("plain", "isolation", "committee", "guarded", "mixed", "cross-encoder")
NEEDS_CROSS_ENCODER = ("mixed", "cross-encoder")
SPLIT = (0.1, 0.2)  # val and test fractions of configs/compare/dialogue*.yaml; the seed is --seed
# the rated sets the §11 cross-encoder trained on (their train splits): with --split test their
# validity rows are the test split's alone
TRAINED_ON = {"dailydialog-zhao", "persona-zhao", "dailydialog-gupta", "conture-turn", "persona-usr"}
GUARD = ["nonalnum", "speaker_tag", "generic", "judge_injection"]  # configs/compare/judges.yaml's
RUBRICS = ("Gold", "Detailed", "Simplified")


def judge(variant: str, args: argparse.Namespace) -> Any:
    base = {"template": "geval", "mode": "prob", "aspect": "Overall_quality"}
    if variant in ("plain", "isolation"):
        return metrics.load("llm-judge", **base, criteria_variant="Gold", isolation=variant == "isolation")
    if variant == "guarded":
        from robusteval.detectors import guard

        # the package's shipped thresholds per task and language (no file), flagged texts score 0
        return guard(judge("isolation", args), GUARD, policy="floor")
    if variant in NEEDS_CROSS_ENCODER and not args.cross_encoder:
        raise SystemExit(f"{variant} needs --cross-encoder <a trained cross-encoder export>")
    if variant == "cross-encoder":
        return metrics.load("cross-encoder", checkpoint=args.cross_encoder)
    if variant == "mixed":
        members = [judge("isolation", args), metrics.load("cross-encoder", checkpoint=args.cross_encoder),
                   metrics.load("bertscore", against="context")]
        return metrics.load("committee", members=members, normalize="quantile", calibration=calibration(args))
    members = [{**base, "criteria_variant": v, "isolation": True} for v in RUBRICS]
    return metrics.load("committee", members=members, on_disagreement="abstain", threshold=args.threshold)


def calibration(args: argparse.Namespace) -> list[Sample]:
    """The mixed committee's scale: well-rated (>= 4) DailyDialog-Zhao replies of the validation
    contexts (10 / 20 % split, seed --seed: never attacked here, never trained on by the §11 base)."""
    everything = data.load("dailydialog-zhao", os.environ["ROBUSTEVAL_DATA"])
    good = [s for s in everything
            if s.human.get("overall", 0) >= 4 and split_of("dailydialog-zhao", s, *SPLIT, args.seed) == "val"]
    return good[: args.calibration_size]


def contexts(name: str, everything: list[Sample], aspect: str, args: argparse.Namespace) -> list[Sample]:
    """The fitting samples, then the attacked ones (the best-rated reply of each context):
    ``--split first`` takes the first contexts; ``--split test`` fits on validation contexts and
    attacks test contexts of the 70 / 10 / 20 split by conversation with --seed (0 by default) -- the split the
    compare configs train the cross-encoder with, so a trained member never saw them."""
    best = select(everything, "best-per-context", aspect=aspect)
    if args.split == "first":
        return best[: args.limit + args.fit_size]
    part = {s.id: split_of(name, s, *SPLIT, args.seed) for s in best}
    fit = [s for s in best if part[s.id] == "val"][: args.fit_size]
    if len(fit) < args.fit_size:  # else test contexts would slide into the fitting samples
        raise SystemExit(f"{name}: only {len(fit)} validation contexts for --fit-size {args.fit_size}")
    return fit + [s for s in best if part[s.id] == "test"][: args.limit]


def attack_list(args: argparse.Namespace, phrase: str | None = None) -> list[Any]:
    opts: dict[str, dict[str, Any]] = {
        "judge-universal-phrase": {"length": args.phrase_length, "vocab_size": args.vocab_size},
        "judge-injection-search": {"budget": args.budget, "length": 4, "candidates": 8},
        "judge-injection-search-ppl": {"budget": args.budget, "length": 4, "candidates": 8},
    }
    out = [attacks.load(n, **opts.get(n, {})) for n in args.families]
    if phrase is not None and "judge-universal-phrase" in args.families:
        out.append(TransferredPhrase(phrase=phrase, length=args.phrase_length, vocab_size=args.vocab_size))
    return out


def plain_phrase(folder: Path) -> str | None:
    """The universal phrase fitted against the plain judge (None before it ran, or when the
    plain run left the phrase family out: ``--families`` without it)."""
    path = folder / "plain" / "fitted.json"
    if not path.is_file():
        return None
    fitted = json.loads(path.read_text(encoding="utf-8")).get("judge-universal-phrase")
    return None if fitted is None else fitted["phrase"]


def human_mean(s: Sample, aspects: list[str]) -> float | None:
    vals = [s.human[a] for a in aspects if a in s.human]
    return float(np.mean(vals)) if vals else None


def validity(metric: Any, rated: list[Sample], aspects: list[str]) -> dict[str, Any]:
    """The variant's correlations with people, and the rated items (id, conversation, human
    mean, score) so that :func:`validity_change` can pair two variants on the same items."""
    keep = [s for s in rated if human_mean(s, aspects) is not None]
    scores = np.asarray(metric.score(keep), dtype=float)
    human = np.array([human_mean(s, aspects) for s in keep])
    clusters = [s.conversation_key() for s in keep]
    return {**correlate(scores, human, n_boot=1000, seed=0, clusters=clusters),
            "items": [{"id": s.id, "conversation": c, "human": float(h), "score": float(x)}
                      for s, c, h, x in zip(keep, clusters, human, scores, strict=True)]}


def validity_change(plain: dict[str, Any] | None, other: dict[str, Any] | None) -> dict[str, Any] | None:
    """``other``'s Spearman minus ``plain``'s on the items both scored, with a paired interval
    (:func:`robusteval.metaeval.correlation_change`); None when either entry lacks its items (a
    summary written before they were kept)."""
    if not plain or not other or "items" not in plain or "items" not in other:
        return None
    theirs = {i["id"]: i["score"] for i in other["items"]}
    shared = [i for i in plain["items"] if i["id"] in theirs]
    return correlation_change(np.array([i["score"] for i in shared]), np.array([theirs[i["id"]] for i in shared]),
                              np.array([i["human"] for i in shared]), [i["conversation"] for i in shared],
                              n_boot=1000, seed=0)


def change_cell(plain: dict[str, Any] | None, other: dict[str, Any] | None) -> str:
    """``other``'s Spearman change from ``plain``'s, with its paired interval where both kept
    their items, else the bare difference said to be one."""
    paired = validity_change(plain, other)
    if paired is not None:
        return fmt_change(paired)
    assert plain is not None and other is not None
    return (f"{other['spearman']['r'] - plain['spearman']['r']:+.3f} "
            "(no paired interval: this summary did not keep the scored items)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--datasets", nargs="*", default=["dailydialog-zhao", "summeval"])
    ap.add_argument("--variants", nargs="*", default=["plain", "isolation", "committee"], choices=VARIANTS)
    ap.add_argument("--limit", type=int, default=20, help="attacked contexts per dataset (+ fitting samples)")
    ap.add_argument("--families", nargs="*", default=FAMILIES, choices=FAMILIES,
                    help="attack families to run (default: all; e.g. only the static ones, without the searches)")
    ap.add_argument("--fit-size", type=int, default=2)
    ap.add_argument("--budget", type=int, default=24,
                    help="victim queries per attack and sample (the injection searches'; master keys use 9)")
    ap.add_argument("--phrase-length", type=int, default=2)
    ap.add_argument("--vocab-size", type=int, default=16)
    ap.add_argument("--threshold", type=float, default=30.0, help="committee: abstain at this range (points)")
    ap.add_argument("--split", choices=("first", "test"), default="first",
                    help="first: the first contexts; test: fit on validation, attack test contexts (see contexts())")
    ap.add_argument("--seed", type=int, default=0,
                    help="the split's seed: the seed the --cross-encoder export was trained with (its run's "
                         "--seed), so its train contexts are never attacked or correlated on")
    ap.add_argument("--cross-encoder", default=None,
                    help="mixed, cross-encoder: the trained cross-encoder export (§11's base)")
    ap.add_argument("--plain-from", default=None,
                    help="the out-dir of a run whose plain judge was attacked: its fitted phrase and (--transfer) its "
                         "search texts are what transfers (default: --out-dir)")
    ap.add_argument("--calibration-size", type=int, default=60, help="mixed: clean replies that set the scales")
    ap.add_argument("--corr", nargs="*", default=["summeval", "usr-topicalchat"])
    ap.add_argument("--corr-limit", type=int, default=60)
    ap.add_argument("--transfer", nargs="*", default=[], choices=VARIANTS,
                    help="variants the searches are not rerun against (their texts found against plain are)")
    ap.add_argument("--skip-validity", action="store_true")
    ap.add_argument("--skip-attacks", action="store_true", help="also: just print the tables of what has run")
    ap.add_argument("--resume", action="store_true")
    args = ap.parse_args(argv)
    if args.plain_from and "plain" in args.variants and not args.skip_attacks:
        ap.error("--plain-from names another run's plain judge: leave plain out of --variants (one source for the "
                 "phrase and the transferred search texts)")
    for v in sorted(set(args.variants) & set(NEEDS_CROSS_ENCODER)):  # refused now, not after hours of attacks
        if not args.cross_encoder:
            ap.error(f"{v} needs --cross-encoder <a trained cross-encoder export>")
        if args.split != "test":
            ap.error(f"{v} needs --split test: the cross-encoder trained on train contexts (and the mixed "
                     "committee's scale is set on validation contexts), so only test contexts are attacked")
        if not args.skip_attacks and set(args.datasets) != {"dailydialog-zhao"}:
            ap.error(f"{v}: the cross-encoder (and the mixed committee's scale) is DailyDialog-Zhao's: "
                     "--datasets dailydialog-zhao")
        if not args.skip_validity and any(data.info(c).task != "dialogue" for c in args.corr):
            ap.error(f"{v} scores dialogue only (its cross-encoder): give --corr dialogue sets")
    if not os.environ.get("ROBUSTEVAL_DATA"):
        print("set ROBUSTEVAL_DATA to the human-judgment data folder", file=sys.stderr)
        return 2
    root = Path(args.out_dir)
    refuse_other_split(root / "summary.json", args)
    summary: dict[str, Any] = {"args": vars(args), "split_scheme": SPLIT_SCHEME, "asr": {}, "validity": {},
                               "seconds": {}}
    picked: dict[str, list[Sample]] = {}  # per dataset: fitting samples, then attacked ones
    built: dict[str, Any] = {}  # per variant: one victim for attacks and validity (models load once,
    # a mixed committee scores its calibration once)

    def victim_of(variant: str) -> Any:
        if variant not in built:
            built[variant] = judge(variant, args)
        return built[variant]

    def chosen_of(name: str) -> list[Sample]:
        if name not in picked:
            everything = data.load(name, os.environ["ROBUSTEVAL_DATA"])
            aspect = "overall" if "overall" in everything[0].human else "relevance"
            picked[name] = contexts(name, everything, aspect, args)
        return picked[name]

    for name in args.datasets:
        chosen = chosen_of(name)
        plain_root = Path(args.plain_from or root)
        phrase = plain_phrase(plain_root / name)
        if phrase is not None:
            summary.setdefault("phrase", {})[name] = phrase
        for variant in [] if args.skip_attacks else args.variants:
            t0 = time.perf_counter()
            victim = victim_of(variant)
            chosen_attacks = attack_list(args, phrase if variant != "plain" else None)
            if variant in args.transfer:
                source = plain_root / name / "plain" / "results.jsonl"
                if not source.is_file():
                    raise SystemExit(f"--transfer {variant}: no plain run at {source} (run --variants plain first, "
                                     "or give --plain-from <its out-dir>)")
                plain_rows = [r.to_dict() for r in read_results(source)[0]]
                chosen_attacks = [a for a in chosen_attacks if a.name not in SEARCHES] + replays(plain_rows, SEARCHES)
            rows = list(run_attacks(chosen, chosen_attacks, victim,
                                    root / name / variant / "results.jsonl", resume=args.resume,
                                    budget=args.budget, dataset=name, fit_on=chosen[: args.fit_size],
                                    progress=True))
            summary["seconds"][f"{name}/{variant}"] = round(time.perf_counter() - t0, 1)
            if variant == "plain":
                phrase = plain_phrase(root / name)
                summary.setdefault("phrase", {})[name] = phrase
            summary["asr"][f"{name}/{variant}"] = {
                k: v["primary"] for k, v in asr_table(rows, key=lambda r: r.attack).items()}
    for name in [] if args.skip_validity else args.corr:
        everything = data.load(name, os.environ["ROBUSTEVAL_DATA"])
        if args.split == "test" and name in TRAINED_ON:  # never correlate on what a member trained on
            everything = [s for s in everything if split_of(name, s, *SPLIT, args.seed) == "test"]
        rated = everything[: args.corr_limit]
        aspects = ["overall"] if "overall" in rated[0].human else sorted(rated[0].human)
        for variant in args.variants:
            t0 = time.perf_counter()
            summary["validity"][f"{name}/{variant}"] = validity(victim_of(variant),
                                                                rated, aspects)
            summary["seconds"][f"{name}/{variant}/validity"] = round(time.perf_counter() - t0, 1)
    for name in args.datasets:  # every variant's ASR from its results (runs of parts add up)
        attacked = None
        if args.split == "test":  # every family on the test contexts alone (the fitting ones are validation's)
            attacked = {s.id for s in chosen_of(name)[args.fit_size:]}
        for variant in VARIANTS:
            results = root / name / variant / "results.jsonl"
            if results.is_file():
                rows = [r for r in read_results(results)[0] if attacked is None or r.sample_id in attacked]
                summary["asr"][f"{name}/{variant}"] = {
                    k: v["primary"] for k, v in asr_table(rows, key=lambda r: r.attack).items()}
                summary.setdefault("attacked_contexts", {})[f"{name}/{variant}"] = len({r.sample_id for r in rows})
    root.mkdir(parents=True, exist_ok=True)
    path = root / "summary.json"
    if path.is_file():  # runs of parts of the benchmark (--skip-*, --variants) add to one summary
        old = json.loads(path.read_text(encoding="utf-8"))
        for part in ("validity", "seconds", "phrase"):
            summary[part] = {**old.get(part, {}), **summary.get(part, {})}
    path.write_text(json.dumps(summary, indent=1, default=str), encoding="utf-8")
    print_tables(summary, args)
    return 0


def refuse_other_split(path: Path, args: argparse.Namespace) -> None:
    """Runs of parts of the benchmark add to one summary.json, so they must pick their contexts
    alike: the same ``--split`` (first contexts, or a split's test contexts) and, for ``test``, the
    same split scheme (:data:`SPLIT_SCHEME`, or one that splits its datasets alike:
    :func:`same_split`). A summary that records no scheme was written by code
    before 5807d5b, whose scheme is unknown here (exact context before 47adb2f, conversation after).
    Refused before any work, rather than mixed."""
    if not path.is_file():
        return
    old = json.loads(path.read_text(encoding="utf-8"))
    split = (old.get("args") or {}).get("split", "first")
    if split != args.split:
        raise SystemExit(f"{path} holds results of --split {split}; this run is --split {args.split}: the two "
                         "do not add up. Use another --out-dir.")
    if args.split != "test":
        return
    scheme = old.get("split_scheme")
    if not same_split(scheme, getattr(args, "datasets", None) or []):
        said = repr(scheme) if scheme else "a scheme it did not record (code before 5807d5b)"
        raise SystemExit(f"{path} holds results of test contexts split by {said}; this code splits by "
                         f"{SPLIT_SCHEME!r}: the two do not add up. Use another --out-dir.")


def print_tables(summary: dict[str, Any], args: argparse.Namespace) -> None:
    for name in args.datasets:
        done = summary.get("attacked_contexts", {})
        print(f"\n### {name}: ASR (beats_reference), at most {args.limit} attacked contexts (+ {args.fit_size} "
              f"fitting); contexts counted per variant: {done}\n")
        cols = [v for v in args.variants if f"{name}/{v}" in summary["asr"]]
        heads = [f"{v} (searches transferred)" if v in args.transfer else v for v in cols]
        print("| attack | " + " | ".join(heads) + " |")
        print("|---|" + "---|" * len(cols))
        names = [*FAMILIES, "judge-universal-phrase-transfer"]
        for a in names:
            cells = []
            for v in cols:
                cell = summary["asr"][f"{name}/{v}"].get(a)
                cells.append(f"{pct(cell)} ({cell['successes']}/{cell['n']})" if cell else "–")
            if any(c != "–" for c in cells):
                print(f"| {a} | " + " | ".join(cells) + " |")
        if name in summary.get("phrase", {}):
            print(f"\nphrase fitted on plain: {summary['phrase'][name]!r}")
    print("\n### Validity: Spearman with people\n")
    print("| set | " + " | ".join(args.variants) + " | change from plain [paired 95% CI] |")
    print("|---|" + "---|" * (len(args.variants) + 1))
    for name in args.corr:
        entries = [summary["validity"].get(f"{name}/{v}") for v in args.variants]
        by_variant = dict(zip(args.variants, entries, strict=True))
        r = {v: (e or {}).get("spearman", {}).get("r") for v, e in by_variant.items()}
        base = r.get("plain")
        # each change names its variant: a variant without a value leaves no gap to misread
        change = ", ".join(f"{v} {change_cell(by_variant.get('plain'), by_variant[v])}" for v in args.variants
                           if v != "plain" and r.get(v) is not None and base is not None)
        print(f"| {name} | " + " | ".join(fmt_r(e) for e in entries) + f" | {change} |")
    print("\nseconds:", json.dumps(summary["seconds"]))


if __name__ == "__main__":
    sys.exit(main())
