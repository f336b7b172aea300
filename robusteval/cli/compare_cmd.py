"""``robusteval compare``: attack each victim metric plain, guarded, adversarially trained and
guarded + trained; ASR per family, human correlation per variant, detector false positives
and ROC curves. Writes ``report.json`` (schema: docs/compare.md), ``report.md`` and a
self-contained ``report.html`` under ``--out-dir``; every stage logs append-only there and
``--resume`` continues a killed run.

``robusteval quickstart``: the same on robusteval's own small rated dialogues and summaries
(package data; no network, no data folder): trains a small MiniLM evaluator, attacks it,
guards it, hardens it and compares (``configs/compare/quickstart.yaml``).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from robusteval.cli.common import add_data_dir, load_config
from robusteval.errors import RobustevalError

QUICKSTART = Path(__file__).resolve().parents[2] / "configs" / "compare" / "quickstart.yaml"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compare", help="pre/post-defense comparison with an HTML report", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", required=True, help="YAML (configs/compare/*.yaml)")
    p.add_argument("--out-dir", required=True)
    p.add_argument("--resume", action="store_true", help="continue a killed run, reusing finished work")
    p.add_argument("--seed", type=int, help="override the config's seed")
    add_data_dir(p)
    p.set_defaults(func=run)
    q = sub.add_parser("quickstart", help="offline demo: train, attack, guard, harden, compare",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    q.add_argument("--config", default=str(QUICKSTART), help="default: configs/compare/quickstart.yaml")
    q.add_argument("--out-dir", default="runs/quickstart")
    q.add_argument("--resume", action="store_true", help="continue (or re-print) an earlier quickstart run")
    q.add_argument("--seed", type=int, help="override the config's seed")
    add_data_dir(q)
    q.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from robusteval.compare import compare
    from robusteval.compare.report_md import HEADLINE, headline_rows, table

    if not Path(args.config).is_file():
        raise RobustevalError(f"config {args.config} not found" + (
            " (the quickstart config ships with the repository checkout; pass --config)"
            if args.command == "quickstart" else ""))
    cfg = load_config(args.config)
    if args.seed is not None:
        cfg["seed"] = args.seed
    out = Path(args.out_dir)
    start = time.perf_counter()
    report = compare(cfg, out, resume=args.resume, data_dir=args.data_dir)
    print()
    print("\n".join(table(HEADLINE, headline_rows(report))))
    print(f"\n{args.command} finished in {time.perf_counter() - start:.0f} s")
    print(f"report: {out / 'report.html'}  (also {out / 'report.md'}, {out / 'report.json'})")
    return 0
