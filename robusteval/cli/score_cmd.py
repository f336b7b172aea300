"""``robusteval score``: score a dataset or a file with one metric.

Writes ``scores.jsonl`` (one ``{id, score}`` row per sample, appended as chunks finish;
``--resume`` continues a killed run -- only the same run: the log's first line records the
metric, its options, the data and the code version) and ``summary.json`` (n, mean, guard
flags and fallback counters, all computed from this run's rows in the log; provenance).
``--dataset`` (or ``--input``) is a registered name, a .jsonl/.json/.csv/.tsv/.parquet file,
``hf:NAME[:CONFIG]``, a local Hugging Face dataset folder or ``module:attr``; ``--metric`` a
registered or entry-point name or ``module:attr``. A ``guard:`` block (or ``--guard a,b
--guard-policy P``) wraps the metric with ``robusteval.detectors.guard``; each row then also
carries the raw score, the guarded score and every detector's suspicion and flag.
"""

from __future__ import annotations

from pathlib import Path

from robusteval.cli.common import Command, check_name, load_metric, provenance, score_with_log
from robusteval.config.parsing import to_dict
from robusteval.config.score import ALIASES, ScoreConfig
from robusteval.results import metric_identity, score_summary, write_json


def run(cfg: ScoreConfig) -> int:
    assert cfg.metric is not None and cfg.out_dir is not None  # validated
    dataset = cfg.source()
    check_name("metrics", cfg.metric)  # an unknown name fails before any data is read
    samples = cfg.load(limit=cfg.limit)
    out = Path(cfg.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    metric = load_metric(cfg.metric, cfg.options, cfg.guard)
    guard = cfg.guard.as_block() if cfg.guard is not None else None
    log = out / "scores.jsonl"
    score_with_log(metric, samples, log, cfg.resume, desc=cfg.metric, fingerprint={
        "command": "score", "metric_name": cfg.metric, "options": cfg.options, "guard": guard,
        "dataset": dataset, "limit": cfg.limit})
    summary = score_summary(log, [s.id for s in samples])  # this run's rows, from the log alone
    write_json(out / "summary.json", {
        "metric": cfg.metric, "options": cfg.options, "dataset": dataset, **summary,
        "reproducibility": metric_identity(metric), "provenance": provenance(to_dict(cfg)),
    })
    mean = "n/a" if summary["mean"] is None else f"{summary['mean']:.2f}"
    print(f"scored {summary['n']} samples with {cfg.metric}: mean {mean}")
    if summary["llm_failed_rows"]:
        from robusteval.metrics.inner import retry_note

        print(retry_note(summary["llm_failed_rows"], "scored row(s)"))
    print(f"wrote {out / 'scores.jsonl'} and {out / 'summary.json'}")
    return 0


COMMANDS = [Command("score", "score samples with a metric", run, ScoreConfig, __doc__, ALIASES)]
