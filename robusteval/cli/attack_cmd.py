"""``robusteval attack``: run attacks on a dataset against a victim metric, report ASR;
``robusteval attacks list``: the registered attacks.

Attacks are given as names, ``family:<family>`` or ``all``. ``--dataset`` (or ``--input``)
is a registered name, a .jsonl/.json/.csv/.tsv/.parquet file, ``hf:NAME[:CONFIG]``, a local
Hugging Face dataset folder or ``module:attr``; ``--metric`` a registered or entry-point name
or ``module:attr``; ``--guard a,b --guard-policy P`` guards it. A config may add ``gold:``
({name, options}: e.g. the LLM judge) to report AdvEval's gold criterion, and
``attack_options:`` (attack name -> constructor options, e.g. ``adveval-pos: {max_iters: 2}``).
A victim with a ``guard:`` block ({detectors, policy, penalty, thresholds}) is attacked behind
``robusteval.detectors.guard``; its rows carry the guard's flags for both texts. Results go to
``<out-dir>/results.jsonl`` (one row per attack and sample, appended as each sample is
finished; ``--resume`` continues a killed run), ``summary.json`` and ``summary.md``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from robusteval.cli.common import (
    Command,
    check_name,
    json_flag,
    load_metric,
    print_listing,
    provenance,
    slug,
    write_outputs,
)
from robusteval.config.attack import ALIASES, AttackConfig
from robusteval.config.parsing import to_dict
from robusteval.errors import RobustevalError


def run(cfg: AttackConfig) -> int:
    from robusteval import attacks, metrics
    from robusteval.asr import summarize, summary_markdown
    from robusteval.attacks.runner import result_key, run_attacks
    from robusteval.attacks.victim import CachedVictim
    from robusteval.data.preprocess import preprocess
    from robusteval.data.select import select, with_reference
    from robusteval.results import metric_identity, sum_counters

    assert cfg.out_dir is not None  # validated
    victims = cfg.victim_list()
    dataset = cfg.source()
    for v in victims:
        check_name("metrics", v.name)
    if cfg.gold is not None:
        check_name("metrics", cfg.gold.name)
    chosen = attacks.select(cfg.attacks, cfg.seed, cfg.attack_options)
    everything = cfg.load()
    samples = select(everything, cfg.select, cfg.select_aspect)
    samples = with_reference(preprocess(samples, cfg.preprocess), cfg.reference)
    samples = samples[:cfg.limit] if cfg.limit is not None else samples
    criteria = cfg.criteria
    # one cache for every victim of this command: the gold's rating of a text does not depend on the victim
    gold = CachedVictim(metrics.load(cfg.gold.name, **cfg.gold.options)) if cfg.gold is not None else None
    root = Path(cfg.out_dir)
    for v in victims:
        label = v.display()
        out = root if len(victims) == 1 else root / slug(label)
        out.mkdir(parents=True, exist_ok=True)
        victim = load_metric(v.name, v.options, v.guard)
        log = run_attacks(samples, chosen, victim, out / "results.jsonl", resume=cfg.resume, budget=cfg.budget,
                          gold_metric=gold, criteria=criteria, dataset=dataset, fingerprint={
                              "command": "attack", "victim_name": v.name, "victim_options": v.options,
                              "gold_options": cfg.gold.options if cfg.gold is not None else None,
                              "guard": v.guard.as_block() if v.guard is not None else None,
                              "attack_spec": cfg.attacks, "seed": cfg.seed, "limit": cfg.limit,
                              "selection": [cfg.select, cfg.select_aspect],
                              "preprocess": cfg.preprocess or "none",
                              "reference": cfg.reference or "dataset",
                              "attack_options": cfg.attack_options or None})
        keys = {result_key(a.name, s.id) for s in samples for a in chosen}
        rows = [r for r in log if r["key"] in keys]  # this run's rows (the log holds no other run's)
        summary = summarize(rows)
        if cfg.system_level:
            add_system_level(summary, rows, samples, preprocess(everything, cfg.preprocess), victim)
        write_outputs(out, "summary", {"victim": label, "dataset": dataset, "n_samples": len(samples),
                                       "selection": cfg.select, "criteria": criteria.describe(),
                                       "attacks": summary, "counters": sum_counters(
                                           (r["meta"] for r in rows), "victim_counters"),
                                       "reproducibility": metric_identity(victim),
                                       "provenance": provenance(to_dict(cfg))},
                      summary_markdown(summary, f"{label} on {dataset}"), extra=[out / "results.jsonl"])
        failed = sorted({r["sample_id"] for r in rows if r["meta"].get("llm_failed")})
        if failed:
            from robusteval.metrics.inner import retry_note

            print(f"{label}: {retry_note(len(failed), 'attacked sample(s)', failed)}")
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


def run_list(args: Any) -> int:
    from robusteval import attacks

    rows = [attacks.describe(n) for n in attacks.names()]
    print_listing(rows, args.json, [("name", 28), ("family", 16), ("direction", 3), ("origin", 10),
                                   ("summary", 0)])
    return 0


COMMANDS = [Command("attack", "attack a metric and measure attack success", run, AttackConfig, __doc__, ALIASES),
            Command("attacks list", "registered attacks", run_list, flags=json_flag)]
