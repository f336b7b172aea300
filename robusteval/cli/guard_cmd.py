"""``robusteval guard calibrate | evaluate`` and ``robusteval detectors list``.

``guard calibrate`` fits each detector's threshold on the calibration half of the clean sets
(human references and well-rated human responses) to a target false-positive rate and writes
``<out-dir>/thresholds.json``, which ``guard(..., thresholds=)`` and ``load(...,
thresholds=)`` read. ``guard evaluate`` reads attack-runner results (``results.jsonl`` or its
folder; the dataset comes from the ``summary.json`` beside it) and reports, per detector and
for their combination, the detection rate per attack family and the false-positive rate on
the held-out half of the clean sets: ``evaluation.json`` and ``evaluation.md``. Both keep
every computed suspicion in ``<out-dir>/suspicion.jsonl``; ``--resume`` reuses it.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from robusteval.cli.common import add_data_dir, load_config, print_listing, provenance, write_outputs
from robusteval.errors import RobustevalError
from robusteval.results import JsonlLog, write_json


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("guard", help="calibrate and evaluate input-sanitization detectors", description=__doc__)
    gsub = p.add_subparsers(dest="action", required=True)
    for action, helptext in (("calibrate", "fit detector thresholds on clean text"),
                             ("evaluate", "detection and false-positive rates")):
        a = gsub.add_parser(action, help=helptext, description=__doc__)
        a.add_argument("--config", help="YAML (configs/guard/*.yaml)")
        a.add_argument("--detectors", help="comma-separated detector names (default: the config's)")
        a.add_argument("--clean", help="comma-separated clean sets (default: the config's)")
        a.add_argument("--out-dir", required=True)
        a.add_argument("--resume", action="store_true", help="reuse suspicions computed by a killed run")
        add_data_dir(a)
        if action == "calibrate":
            a.add_argument("--target-fpr", type=float, help="false-positive rate to allow (default 0.01)")
            a.add_argument("--per-detector", action="store_true",
                           help="give every detector the full target instead of splitting it (Bonferroni)")
            a.add_argument("--by-group", action="store_true",
                           help="also calibrate per task and response language (the package's shipped defaults "
                                "are made this way; docs/detectors.md)")
            a.add_argument("--min-n", type=int, default=50, help="with --by-group: the fewest samples a group needs")
            a.add_argument("--floor-at-default", action="store_true",
                           help="with --by-group: never set a group's threshold below the detector's class default")
            a.set_defaults(func=run_calibrate)
        else:
            a.add_argument("--thresholds", help="thresholds.json from `guard calibrate` (default: detector defaults)")
            a.add_argument("--attack-results", action="append", default=[], metavar="PATH",
                           help="attack results.jsonl or its folder (repeatable)")
            a.add_argument("--dataset", help="dataset of the attack results when no summary.json names it")
            a.set_defaults(func=run_evaluate)
    dp = sub.add_parser("detectors", help="list detectors")
    dsub = dp.add_subparsers(dest="action", required=True)
    dl = dsub.add_parser("list", help="registered detectors")
    dl.add_argument("--json", action="store_true", help="JSON array, one object per detector")
    dl.set_defaults(func=run_list)


def _detector_specs(args: argparse.Namespace, cfg: dict[str, Any]) -> list[Any]:
    if args.detectors:
        return [d.strip() for d in args.detectors.split(",") if d.strip()]
    if cfg.get("detectors"):
        return list(cfg["detectors"])
    from robusteval import detectors

    return detectors.names()


def _clean(args: argparse.Namespace, cfg: dict[str, Any], split: str) -> dict[str, list[Any]]:
    from robusteval.detectors.clean import load_clean

    names = args.clean.split(",") if args.clean else cfg.get("clean") or ["summeval-references", "dailydialog-good",
                                                                           "usr-topicalchat-ground-truth"]
    data_dir = args.data_dir or cfg.get("data_dir")
    return {n.strip(): load_clean(n.strip(), split, data_dir) for n in names if n.strip()}


def run_calibrate(args: argparse.Namespace) -> int:
    from robusteval import detectors
    from robusteval.detectors.calibrate import calibrate, calibrate_groups

    cfg = load_config(args.config)
    dets = detectors.resolve(_detector_specs(args, cfg))
    clean = _clean(args, cfg, "calibration")
    target = args.target_fpr if args.target_fpr is not None else float(cfg.get("target_fpr", 0.01))
    combined = not args.per_detector and bool(cfg.get("combined", True))
    out = Path(args.out_dir)
    log = JsonlLog(out / "suspicion.jsonl", key="key", resume=args.resume)
    if args.by_group or cfg.get("by_group"):
        table = calibrate_groups(dets, clean, target, combined=combined, log=log, min_n=args.min_n,
                                 floor_at_default=args.floor_at_default or bool(cfg.get("floor_at_default")))
    else:
        table = calibrate(dets, clean, target, combined=combined, log=log)
    table["provenance"] = provenance(cfg)
    write_json(out / "thresholds.json", table)
    for name, entry in table["detectors"].items():
        never = "  (never fires on clean data at this rate)" if entry["never_fires"] else ""
        print(f"{name:<16} threshold {entry['threshold']:.4g}  calibration FPR "
              f"{100 * entry['calibration_fpr']:.2f}% of {entry['n']}{never}")
    for group, entry in (table.get("groups") or {}).items():
        cells = ", ".join(f"{n} {e['threshold']:.3g}" for n, e in entry["detectors"].items())
        print(f"  {group} (n={entry['n']}): {cells}")
    if table.get("groups_too_small"):
        print(f"  groups below --min-n, pooled only: {table['groups_too_small']}")
    print(f"wrote {out / 'thresholds.json'}")
    return 0


def run_evaluate(args: argparse.Namespace) -> int:
    from robusteval import data, detectors
    from robusteval.attacks.runner import read_results
    from robusteval.detectors.calibrate import adversarial_samples, evaluate, evaluation_markdown

    cfg = load_config(args.config)
    if not args.attack_results:
        raise RobustevalError("give at least one --attack-results file or folder")
    dets = detectors.resolve(_detector_specs(args, cfg), args.thresholds)
    attacked: list[Any] = []
    for path in args.attack_results:
        rows, dataset = read_results(path)
        dataset = args.dataset or dataset
        if not dataset:
            raise RobustevalError(f"{path}: the result rows name no single dataset; pass --dataset")
        by_id = {s.id: s for s in data.load(dataset, args.data_dir or cfg.get("data_dir"))}
        attacked += adversarial_samples(rows, by_id)
    clean = _clean(args, cfg, "heldout")
    out = Path(args.out_dir)
    log = JsonlLog(out / "suspicion.jsonl", key="key", resume=args.resume)
    result = evaluate(dets, attacked, clean, log=log)
    result["attack_results"] = list(args.attack_results)
    result["thresholds_file"] = args.thresholds
    result["provenance"] = provenance(cfg)
    write_outputs(out, "evaluation", result, evaluation_markdown(result))
    return 0


def run_list(args: argparse.Namespace) -> int:
    from robusteval import detectors

    rows = [detectors.info(n) for n in detectors.names()]
    print_listing(rows, args.json, [("name", 16), ("family", 10), ("summary", 0)])
    return 0
