"""``robusteval score``: score a dataset or a JSONL/CSV file with one metric.

Writes ``scores.jsonl`` (one ``{id, score}`` row per sample, appended as chunks finish;
``--resume`` continues a killed run -- only the same run: the log's first line records the
metric, its options, the data and the code version) and ``summary.json`` (n, mean, guard
flags and fallback counters, all computed from this run's rows in the log; provenance). A
config's ``guard:`` block ({detectors, policy, penalty, thresholds}) wraps the metric with
``robusteval.detectors.guard``; each row then also carries the raw score, the guarded score
and every detector's suspicion and flag.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from robusteval.cli.common import (
    add_data_dir,
    load_config,
    load_metric,
    parse_options,
    provenance,
    score_with_log,
)
from robusteval.errors import RobustevalError
from robusteval.results import metric_identity, score_summary, write_json


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("score", help="score samples with a metric", description=__doc__)
    p.add_argument("--config", help="YAML with any of the options below (flags win)")
    p.add_argument("--metric", help="metric name (robusteval metrics list)")
    p.add_argument("-o", "--option", action="append", metavar="KEY=VALUE",
                   help="metric option, repeatable (e.g. -o against=context)")
    p.add_argument("--dataset", help="registered dataset name")
    p.add_argument("--input", help="a JSONL/CSV file instead of --dataset")
    p.add_argument("--columns", action="append", metavar="FIELD=COLUMN",
                   help="with --input: Sample field -> file column (response=..., context=...)")
    p.add_argument("--task", default=None, help="with --input: the task (default dialogue)")
    p.add_argument("--limit", type=int, help="first N samples only")
    p.add_argument("--out-dir", required=True, help="output folder")
    p.add_argument("--resume", action="store_true", help="continue an interrupted run")
    add_data_dir(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from robusteval import data, metrics

    cfg = load_config(args.config)
    metric_name = args.metric or cfg.get("metric")
    if not metric_name:
        raise RobustevalError("--metric is required")
    metrics.info(metric_name)  # unknown names fail before any data is read
    options = {**(cfg.get("options") or {}), **parse_options(args.option)}
    dataset = args.dataset or cfg.get("dataset")
    source = args.input or cfg.get("input")
    if bool(dataset) == bool(source):
        raise RobustevalError("give exactly one of --dataset or --input")
    limit = args.limit if args.limit is not None else cfg.get("limit")
    if dataset:
        samples = data.load(dataset, args.data_dir or cfg.get("data_dir"), limit=limit)
    else:
        columns = {**(cfg.get("columns") or {}), **parse_options(args.columns)}
        samples = data.load_file(source, columns=columns or None,
                                 task=args.task or cfg.get("task", "dialogue"))[:limit]
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    metric = load_metric(metric_name, options, cfg.get("guard"))
    log = out / "scores.jsonl"
    score_with_log(metric, samples, log, args.resume, desc=metric_name, fingerprint={
        "command": "score", "metric_name": metric_name, "options": options, "guard": cfg.get("guard"),
        "dataset": dataset or str(source), "limit": limit})
    summary = score_summary(log, [s.id for s in samples])  # this run's rows, from the log alone
    write_json(out / "summary.json", {
        "metric": metric_name, "options": options, "dataset": dataset or source, **summary,
        "reproducibility": metric_identity(metric), "provenance": provenance(cfg),
    })
    mean = "n/a" if summary["mean"] is None else f"{summary['mean']:.2f}"
    print(f"scored {summary['n']} samples with {metric_name}: mean {mean}")
    print(f"wrote {out / 'scores.jsonl'} and {out / 'summary.json'}")
    return 0
