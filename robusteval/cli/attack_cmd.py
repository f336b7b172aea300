"""``robusteval attack``: run attacks on a dataset against a victim metric, report ASR;
``robusteval attacks list``: the registered attacks.

Attacks are given as names, ``family:<family>`` or ``all``. A config may add ``gold:``
({name, options}: e.g. the LLM judge) to report AdvEval's gold criterion, and
``attack_options:`` (attack name -> constructor options, e.g. ``adveval-pos: {max_iters: 2}``).
A victim with a ``guard:`` block ({detectors, policy, penalty, thresholds}) is attacked behind
``robusteval.detectors.guard``; its rows carry the guard's flags for both texts. Results go to
``<out-dir>/results.jsonl`` (one row per attack and sample, appended as each sample is
finished; ``--resume`` continues a killed run), ``summary.json`` and ``summary.md``.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from robusteval.cli.common import (
    add_data_dir,
    load_config,
    load_metric,
    parse_options,
    print_listing,
    provenance,
    slug,
    write_outputs,
)
from robusteval.errors import RobustevalError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("attack", help="attack a metric and measure attack success", description=__doc__)
    p.add_argument("--config", help="YAML (configs/attacks/*.yaml); flags win")
    p.add_argument("--metric", help="victim metric name")
    p.add_argument("-o", "--option", action="append", metavar="KEY=VALUE", help="victim option")
    p.add_argument("--dataset", help="dataset name")
    p.add_argument("--attacks", help="comma-separated names, family:<family> or all")
    p.add_argument("--limit", type=int, help="first N samples")
    p.add_argument("--budget", type=int, help="victim-query budget per search attack (default 300)")
    p.add_argument("--seed", type=int, help="attack seed (default 0)")
    p.add_argument("--out-dir", required=True)
    p.add_argument("--resume", action="store_true")
    add_data_dir(p)
    p.set_defaults(func=run)
    lp = sub.add_parser("attacks", help="list attacks")
    lsub = lp.add_subparsers(dest="action", required=True)
    ll = lsub.add_parser("list", help="registered attacks")
    ll.add_argument("--json", action="store_true", help="JSON array, one object per attack")
    ll.set_defaults(func=run_list)


def _victims(args: argparse.Namespace, cfg: dict[str, Any]) -> list[dict[str, Any]]:
    """One victim from flags / ``victim:``, or several from ``victims:`` (each gets a subfolder)."""
    if args.metric:
        return [{"name": args.metric, "options": parse_options(args.option)}]
    if cfg.get("victims"):
        return [dict(v) for v in cfg["victims"]]
    if cfg.get("victim"):
        v = dict(cfg["victim"])
        v["options"] = {**(v.get("options") or {}), **parse_options(args.option)}
        return [v]
    return []


def run(args: argparse.Namespace) -> int:
    from robusteval import attacks, data, metrics
    from robusteval.asr import summarize, summary_markdown
    from robusteval.attacks.criteria import Criteria
    from robusteval.attacks.runner import result_key, run_attacks
    from robusteval.attacks.victim import CachedVictim
    from robusteval.data.preprocess import preprocess
    from robusteval.data.select import select, with_reference
    from robusteval.results import metric_identity, sum_counters

    cfg = load_config(args.config)
    victims = _victims(args, cfg)
    dataset = args.dataset or cfg.get("dataset")
    spec = args.attacks or cfg.get("attacks")
    if not (victims and dataset and spec):
        raise RobustevalError("need a victim metric, a dataset and attacks (flags or --config)")
    for v in victims:
        metrics.info(v["name"])
    seed = args.seed if args.seed is not None else int(cfg.get("seed", 0))
    budget = args.budget if args.budget is not None else int(cfg.get("budget", 300))
    chosen = attacks.select(spec, seed, cfg.get("attack_options"))
    everything = data.load(dataset, args.data_dir or cfg.get("data_dir"))
    samples = select(everything, cfg.get("select", "all"), cfg.get("select_aspect"))
    samples = with_reference(preprocess(samples, cfg.get("preprocess")), cfg.get("reference"))
    limit = args.limit if args.limit is not None else cfg.get("limit")
    samples = samples[:limit] if limit is not None else samples
    criteria = Criteria.from_config(cfg.get("criteria"))
    gold_cfg = cfg.get("gold")
    # one cache for every victim of this command: the gold's rating of a text does not depend on the victim
    gold = CachedVictim(metrics.load(gold_cfg["name"], **(gold_cfg.get("options") or {}))) if gold_cfg else None
    root = Path(args.out_dir)
    for v in victims:
        options = v.get("options") or {}
        label = v.get("label") or v["name"] + (
            f" ({', '.join(f'{k}={val}' for k, val in options.items())})" if options else "")
        out = root if len(victims) == 1 else root / slug(label)
        out.mkdir(parents=True, exist_ok=True)
        victim = load_metric(v["name"], options, v.get("guard"))
        log = run_attacks(samples, chosen, victim, out / "results.jsonl", resume=args.resume, budget=budget,
                          gold_metric=gold, criteria=criteria, dataset=dataset, fingerprint={
                              "command": "attack", "victim_name": v["name"], "victim_options": options,
                              "guard": v.get("guard"), "attack_spec": spec, "seed": seed, "limit": limit,
                              "selection": [cfg.get("select", "all"), cfg.get("select_aspect")],
                              "preprocess": cfg.get("preprocess", "none"),
                              "reference": cfg.get("reference", "dataset"),
                              "attack_options": cfg.get("attack_options")})
        keys = {result_key(a.name, s.id) for s in samples for a in chosen}
        rows = [r for r in log if r["key"] in keys]  # this run's rows (the log holds no other run's)
        summary = summarize(rows)
        if cfg.get("system_level"):
            add_system_level(summary, rows, samples, preprocess(everything, cfg.get("preprocess")), victim)
        write_outputs(out, "summary", {"victim": label, "dataset": dataset, "n_samples": len(samples),
                                       "selection": cfg.get("select", "all"), "criteria": criteria.describe(),
                                       "attacks": summary, "counters": sum_counters(
                                           (r["meta"] for r in rows), "victim_counters"),
                                       "reproducibility": metric_identity(victim), "provenance": provenance(cfg)},
                      summary_markdown(summary, f"{label} on {dataset}"), extra=[out / "results.jsonl"])
    return 0


def add_system_level(summary: dict[str, Any], rows: list[dict[str, Any]], samples: list[Any],
                     everything: list[Any], victim: Any) -> None:
    """Mu & Lim's system-level criterion (§2.5) for each universal attack: the victim scores
    every system's output on the attacked documents (``system_id`` in the data), and
    :func:`robusteval.asr.system_level` compares the attack's mean with each system's."""
    from robusteval.asr import system_level

    by_context: dict[tuple[str, ...], list[Any]] = {}
    for s in everything:
        by_context.setdefault(s.context, []).append(s)
    outputs = [(s.id, o) for s in samples for o in by_context.get(s.context, []) if o.meta.get("system_id") is not None]
    if not outputs:
        raise RobustevalError("system_level: true needs a dataset whose samples name their system (system_id)")
    scores = victim.score([o for _, o in outputs])
    systems: dict[str, dict[str, float]] = {}
    for (doc, o), v in zip(outputs, scores, strict=True):
        systems.setdefault(str(o.meta["system_id"]), {})[doc] = float(v)
    for name, entry in summary.items():
        if entry.get("family") == "universal":
            entry["system_level"] = system_level([r for r in rows if r["attack"] == name], systems)


def run_list(args: argparse.Namespace) -> int:
    from robusteval import attacks

    rows = [attacks.describe(n) for n in attacks.names()]
    print_listing(rows, args.json, [("name", 28), ("family", 16), ("direction", 3), ("summary", 0)])
    return 0
