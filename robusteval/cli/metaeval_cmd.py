"""``robusteval metaeval``: correlations between metrics and human judgments.

Either flags (one metric, one or more datasets) or ``--config configs/metaeval/<name>.yaml``
with lists of ``metrics`` ({name, label, options, datasets, limit}) and ``datasets``
({name, aspects, limit, system}). Scores are logged per (metric, dataset) under
``<out-dir>/scores/`` as they are computed (``--resume`` reuses them); results go to
``metaeval.json`` and ``metaeval.md``.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from robusteval.cli.common import (
    add_data_dir,
    load_config,
    parse_options,
    provenance,
    score_with_log,
    slug,
    write_outputs,
)
from robusteval.errors import RobustevalError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("metaeval", help="correlate metrics with human judgments", description=__doc__)
    p.add_argument("--config", help="YAML config (configs/metaeval/*.yaml)")
    p.add_argument("--metric", help="metric name (instead of a config)")
    p.add_argument("-o", "--option", action="append", metavar="KEY=VALUE", help="metric option")
    p.add_argument("--dataset", action="append", help="dataset name, repeatable")
    p.add_argument("--aspects", help="comma-separated human aspects (default: all)")
    p.add_argument("--limit", type=int, help="first N samples of each dataset")
    p.add_argument("--n-boot", type=int, help="bootstrap resamples (default 1000)")
    p.add_argument("--seed", type=int, help="bootstrap seed (default 0)")
    p.add_argument("--out-dir", required=True)
    p.add_argument("--resume", action="store_true", help="reuse scores of an interrupted run")
    add_data_dir(p)
    p.set_defaults(func=run)


def _plan(args: argparse.Namespace, cfg: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    if args.metric:
        metrics_cfg = [{"name": args.metric, "options": parse_options(args.option)}]
    else:
        metrics_cfg = list(cfg.get("metrics") or [])
    if args.dataset:
        aspects = args.aspects.split(",") if args.aspects else None
        datasets_cfg = [{"name": d, "aspects": aspects, "limit": args.limit} for d in args.dataset]
    else:
        datasets_cfg = list(cfg.get("datasets") or [])
        if args.limit is not None:
            for d in datasets_cfg:
                d["limit"] = args.limit
    if not metrics_cfg or not datasets_cfg:
        raise RobustevalError("nothing to do: give --metric and --dataset, or a --config with "
                              "'metrics' and 'datasets'")
    for m in metrics_cfg:
        m.setdefault("label", m["name"] + (f" ({', '.join(f'{k}={v}' for k, v in m.get('options', {}).items())})"
                                           if m.get("options") else ""))
    return metrics_cfg, datasets_cfg


def run(args: argparse.Namespace) -> int:
    from robusteval import data, metrics
    from robusteval.errors import InputError
    from robusteval.metaeval import metaevaluate

    cfg = load_config(args.config)
    metrics_cfg, datasets_cfg = _plan(args, cfg)
    for mc in metrics_cfg:
        metrics.info(mc["name"])  # unknown names fail before any scoring
    n_boot = args.n_boot if args.n_boot is not None else int(cfg.get("n_boot", 1000))
    seed = args.seed if args.seed is not None else int(cfg.get("seed", 0))
    data_dir = args.data_dir or cfg.get("data_dir")
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    loaded = {d["name"]: data.load(d["name"], data_dir, limit=d.get("limit")) for d in datasets_cfg}
    results: dict[str, dict[str, Any]] = {d["name"]: {} for d in datasets_cfg}
    reports: dict[str, Any] = {}
    for mc in metrics_cfg:
        metric = metrics.load(mc["name"], **(mc.get("options") or {}))
        for dc in datasets_cfg:
            if mc.get("datasets") and dc["name"] not in mc["datasets"]:
                continue
            samples = loaded[dc["name"]][: mc.get("limit")]  # a metric may cap its share (slow LLMs)
            log = out / "scores" / f"{slug(mc['label'])}__{dc['name']}.jsonl"
            try:
                scores = score_with_log(metric, samples, log, resume=args.resume,
                                        desc=f"{mc['label']} on {dc['name']}")
            except InputError as exc:
                results[dc["name"]][mc["label"]] = {"skipped": str(exc)}
                print(f"skipped {mc['label']} on {dc['name']}: {exc}")
                continue
            results[dc["name"]][mc["label"]] = metaevaluate(
                samples, scores, dc.get("aspects"), n_boot=n_boot, seed=seed,
                system=bool(dc.get("system", False)))
            print(f"done {mc['label']} on {dc['name']} ({len(samples)} samples)")
        reports[mc["label"]] = metric.report()
    report = {"provenance": provenance(cfg or {"metrics": metrics_cfg, "datasets": datasets_cfg}),
              "n_boot": n_boot, "seed": seed, "datasets": datasets_cfg, "results": results,
              "metric_reports": reports}
    write_outputs(out, "metaeval", report, render_markdown(report))
    return 0


def render_markdown(report: dict[str, Any]) -> str:
    from robusteval.metaeval import fmt_r

    lines = ["# Meta-evaluation: Spearman rho with human judgments [95% bootstrap CI]", ""]
    for d in report["datasets"]:
        res = report["results"][d["name"]]
        if not res:
            continue
        aspects = d.get("aspects") or sorted({a for r in res.values() if "skipped" not in r for a in r})
        sizes = [r[a]["n"] for r in res.values() if "skipped" not in r for a in aspects if a in r]
        lines += [f"## {d['name']} (n={max(sizes, default=0)})", ""]
        lines.append("| metric | n | " + " | ".join(aspects) + " |")
        lines.append("|---|---|" + "---|" * len(aspects))
        for label, r in res.items():
            if "skipped" in r:
                lines.append(f"| {label} | 0 | " + " | ".join("n/a" for _ in aspects) + " |")
                continue
            n = max((r[a]["n"] for a in aspects if a in r), default=0)
            lines.append(f"| {label} | {n} | " + " | ".join(fmt_r(r.get(a)) for a in aspects) + " |")
        if d.get("system"):
            lines += ["", f"System level (Spearman / Kendall over systems) on {d['name']}:", "",
                      "| metric | " + " | ".join(aspects) + " |", "|---|" + "---|" * len(aspects)]
            for label, r in res.items():
                if "skipped" in r:
                    continue
                cells = []
                for a in aspects:
                    s = (r.get(a) or {}).get("system")
                    cells.append("n/a" if not s or s["spearman"] is None else
                                 f"{s['spearman']:.3f} / {s['kendall']:.3f}")
                lines.append(f"| {label} | " + " | ".join(cells) + " |")
        skipped = {k: v["skipped"] for k, v in res.items() if "skipped" in v}
        if skipped:
            lines += [""] + [f"- {k}: skipped ({v})" for k, v in skipped.items()]
        lines.append("")
    return "\n".join(lines)
