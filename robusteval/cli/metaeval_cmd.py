"""``robusteval metaeval``: correlations between metrics and human judgments.

Either flags (one metric, one or more datasets: names, files, ``hf:NAME``) or
``--config configs/metaeval/<name>.yaml``
with lists of ``metrics`` ({name, label, options, datasets, limit}) and ``datasets``
({name, aspects, limit, system}). Scores are logged per (metric, dataset) under
``<out-dir>/scores/`` as they are computed (``--resume`` reuses them); results go to
``metaeval.json`` and ``metaeval.md``.
"""

from __future__ import annotations

import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

from robusteval.cli.common import Command, check_name, provenance, score_with_log, slug, write_outputs
from robusteval.config.metaeval import ALIASES, MetaevalConfig
from robusteval.config.parsing import to_dict


def run(cfg: MetaevalConfig) -> int:
    from robusteval import metrics
    from robusteval.config.common import load_samples
    from robusteval.errors import InputError
    from robusteval.metaeval import metaevaluate

    assert cfg.out_dir is not None  # validated
    metrics_cfg, datasets_cfg = cfg.plan()
    for mc in metrics_cfg:
        check_name("metrics", mc.name)  # unknown names fail before any scoring
    loaded = {d.name: load_samples(d.name, data_dir=cfg.data_dir, limit=d.limit) for d in datasets_cfg}
    for d in datasets_cfg:
        check_rated(d.name, loaded[d.name], d.aspects)
    out = Path(cfg.out_dir)  # made once the data can be correlated at all
    out.mkdir(parents=True, exist_ok=True)
    results: dict[str, dict[str, Any]] = {d.name: {} for d in datasets_cfg}
    reports: dict[str, Any] = {}
    for mc in metrics_cfg:
        assert mc.label is not None
        metric = metrics.load(mc.name, **mc.options)
        for dc in datasets_cfg:
            if mc.datasets and dc.name not in mc.datasets:
                continue
            samples = loaded[dc.name][: mc.limit]  # a metric may cap its share (slow LLMs)
            log = out / "scores" / f"{slug(mc.label)}__{slug(dc.name)}.jsonl"
            try:
                scores = score_with_log(metric, samples, log, resume=cfg.resume,
                                        desc=f"{mc.label} on {dc.name}")
            except InputError as exc:
                results[dc.name][mc.label] = {"skipped": str(exc)}
                print(f"skipped {mc.label} on {dc.name}: {exc}")
                continue
            results[dc.name][mc.label] = metaevaluate(
                samples, scores, dc.aspects, n_boot=cfg.n_boot, seed=cfg.seed, system=dc.system)
            print(f"done {mc.label} on {dc.name} ({len(samples)} samples)")
        reports[mc.label] = metric.report()
    report = {"provenance": provenance(to_dict(cfg)), "n_boot": cfg.n_boot, "seed": cfg.seed,
              "datasets": [asdict(d) for d in datasets_cfg], "results": results, "metric_reports": reports}
    write_outputs(out, "metaeval", report, render_markdown(report))
    if not any("skipped" not in r for res in results.values() for r in res.values()):
        print("robusteval metaeval: error: no metric could score any dataset (every pair was skipped, reasons "
              f"above and in {out / 'metaeval.md'}): nothing was measured", file=sys.stderr)
        return 2
    return 0


def check_rated(name: str, samples: list[Any], aspects: list[str] | None) -> None:
    """A dataset with no human rating at all, or an asked-for aspect no sample has, is refused
    before any scoring (it used to print an empty table and exit 0)."""
    from robusteval.errors import DataFormatError

    have = sorted({a for s in samples for a in s.human})
    if not have:
        raise DataFormatError(name, "no sample has a human rating, so there is nothing to correlate with: give a "
                              "rating column (e.g. 'rating', 'score', 'human_<aspect>') or map one with --columns "
                              "human.<aspect>=COLUMN")
    missing = [a for a in aspects or () if a not in have]
    if missing:
        raise DataFormatError(name, f"no sample is rated for aspect(s) {', '.join(missing)}; the data has "
                              f"{', '.join(have)}")


def render_markdown(report: dict[str, Any]) -> str:
    from robusteval.metaeval import fmt_r

    lines = ["# Meta-evaluation: Spearman rho with human judgments [95% bootstrap CI]", ""]
    for d in report["datasets"]:
        res = report["results"][d["name"]]
        if not res:
            continue
        aspects = d.get("aspects") or sorted({a for r in res.values() if "skipped" not in r for a in r})
        sizes = [r[a]["n"] for r in res.values() if "skipped" not in r for a in aspects if a in r]
        most = max(sizes, default=0)
        lines += [f"## {d['name']} (n={most})" if len(set(sizes)) <= 1 else
                  f"## {d['name']} (n up to {most}; a cell on fewer pairs names its n)", ""]
        lines.append("| metric | n | " + " | ".join(aspects) + " |")
        lines.append("|---|---|" + "---|" * len(aspects))
        for label, r in res.items():
            if "skipped" in r:
                lines.append(f"| {label} | 0 | " + " | ".join("n/a" for _ in aspects) + " |")
                continue
            n = max((r[a]["n"] for a in aspects if a in r), default=0)
            # an aspect rated on fewer samples (or a metric that refused some) correlates fewer
            # pairs than the row's n: its cell says how many
            lines.append(f"| {label} | {n} | " + " | ".join(
                fmt_r(r.get(a)) + (f" (n {r[a]['n']})" if a in r and r[a].get("n", n) != n else "")
                for a in aspects) + " |")
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
        scored = [label for label, r in res.items() if "skipped" not in r]
        unrated: dict[tuple[str, int, int], list[str]] = {}
        for label in scored:  # the same count for every metric unless their limits differ
            for a in aspects:
                e = res[label].get(a) or {}
                if e.get("unrated"):
                    unrated.setdefault((a, e["unrated"], e["unrated"] + e["n"] + e["dropped_nonfinite"]),
                                       []).append(label)
        if unrated:
            lines += ["", "Samples without the rating, so not correlated: " + "; ".join(
                f"{a}: {k} of {total}" + ("" if len(labels) == len(scored) else f" ({', '.join(labels)})")
                for (a, k, total), labels in sorted(unrated.items()))]
        skipped = {k: v["skipped"] for k, v in res.items() if "skipped" in v}
        if skipped:
            lines += [""] + [f"- {k}: skipped ({v})" for k, v in skipped.items()]
        lines.append("")
    return "\n".join(lines)


COMMANDS = [Command("metaeval", "correlate metrics with human judgments", run, MetaevalConfig, __doc__, ALIASES)]
