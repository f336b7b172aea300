"""Training the learned victims of a comparison: base, adversarially trained, per family.

For a victim with a ``train:`` block (a LoRA cross-encoder, trained with
:func:`robusteval.training.harden.train_round`):

* ``base`` — trained on the human judgments of the train split (or taken from
  ``train.checkpoint``); it is the *plain* variant;
* the base is attacked on the train contexts with the training attacks; the examples that
  fooled it are kept (``train_attacks/``);
* ``trained`` — the base trained further on human judgments + all those examples;
* ``family-<X>`` — the base trained further on family X's examples alone, for the
  generalization matrix (train on X, attack with Y).

Every model folder records ``round.json`` when its training finished; a resumed comparison
reuses finished models and retrains unfinished ones from scratch (same seed, same result).
"""

from __future__ import annotations

import contextlib
import json
import logging
import shutil
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from robusteval.compare.config import CompareConfig, SuiteSpec, TrainSpec
from robusteval.errors import RobustevalError
from robusteval.results import write_json
from robusteval.types import Sample

SPLIT_KEYS = ("val_fraction", "test_fraction", "seed")


def data_args(train: TrainSpec, suite: SuiteSpec, cfg: CompareConfig, data_dir: str | None) -> dict[str, Any]:
    """ScoringDataModule arguments: the suite's split and the config's seed, so the contexts a
    learned victim trains on are never the contexts it is attacked on."""
    clash = [k for k in SPLIT_KEYS if k in train.data]
    if clash:
        raise RobustevalError(f"compare config: set {clash} in the suite's split / the top-level seed, "
                              "not in train.data (training and attacks must share one split)")
    return {"datasets": [suite.dataset], **train.data, **suite.split, "seed": cfg.seed,
            "data_dir": data_dir or cfg.data_dir}


@contextlib.contextmanager
def quiet_lightning() -> Iterator[None]:
    """Lightning's banners (accelerator lines, seed, tips) and its small-dataset warnings off
    while a comparison trains its models; progress bars and errors stay."""
    names = ("lightning.pytorch.utilities.rank_zero", "lightning.fabric.utilities.seed", "lightning.pytorch")
    loggers = [logging.getLogger(n) for n in names]
    levels = [lg.level for lg in loggers]
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*(log_every_n_steps|LeafSpec|does not have many workers).*")
        for lg in loggers:
            lg.setLevel(logging.WARNING)
        try:
            yield
        finally:
            for lg, level in zip(loggers, levels, strict=True):
                lg.setLevel(level)


def fit_once(folder: Path, model_args: dict[str, Any], dargs: dict[str, Any], epochs: int, init: str | None,
             resume: bool) -> dict[str, Any]:
    """Train one model into ``folder`` (``export/`` adapter) unless a finished one is there."""
    from robusteval.training.harden import train_round

    done = folder / "round.json"
    if done.is_file():
        if not resume:
            raise FileExistsError(f"{folder} holds a trained model: pass --resume to reuse it, or choose "
                                  "another --out-dir")
        return json.loads(done.read_text(encoding="utf-8"))
    if folder.exists():
        shutil.rmtree(folder)  # an unfinished run: start it again from scratch
    with quiet_lightning():
        export, test_metrics = train_round(folder, model_args, dargs, epochs, init)
    record = {"export": export, "init": init, "epochs": epochs,
              "test_metrics": {k: round(v, 6) for k, v in sorted(test_metrics.items())}}
    write_json(done, record)
    return record


def train_victim(train: TrainSpec, suite: SuiteSpec, cfg: CompareConfig, train_samples: Sequence[Sample],
                 all_attack_names: Sequence[str], out: Path, resume: bool, data_dir: str | None,
                 load: Callable[[str], Any]) -> tuple[dict[str, Any], Any]:
    """Base, trained and per-family models (see the module docstring). Returns their records
    (exports, test metrics) and the base as a metric (``load(export)``), loaded once: it is
    attacked here for training examples and is the comparison's plain variant."""
    from robusteval import attacks
    from robusteval.asr import as_row, summarize, training_example
    from robusteval.attacks.runner import run_attacks

    dargs = data_args(train, suite, cfg, data_dir)
    if train.checkpoint:
        base = {"export": train.checkpoint, "init": None, "epochs": 0, "test_metrics": {}}
    else:
        base = fit_once(out / "base", train.model, dargs, train.epochs, None, resume)
    chosen = attacks.select(train.attacks or list(all_attack_names), cfg.seed, suite.attack_options)
    held = set(train.held_out)
    train_attacks = [a for a in chosen if a.family not in held]
    unknown = set(train.generalization) - {a.family for a in train_attacks}
    if unknown:
        raise RobustevalError(f"generalization families {sorted(unknown)} are not among the training attacks' "
                              "families (or are held out)")
    pool = list(train_samples)[: train.train_limit]
    victim = load(base["export"])
    adv_dir = out / "train_attacks"
    log = run_attacks(pool, train_attacks, victim, adv_dir / "results.jsonl", resume=resume, budget=cfg.budget,
                      dataset=suite.dataset, criteria=cfg.criteria)
    rows = list(log)
    write_json(adv_dir / "summary.json", {"dataset": suite.dataset, "attacks": summarize(rows)})
    fooled_by_family: dict[str, int] = {}
    for r in map(as_row, rows):
        if training_example(r):
            fooled_by_family[r.family] = fooled_by_family.get(r.family, 0) + 1
    adv = {"adversarial": [str(adv_dir)], "only_successful": True}
    trained = fit_once(out / "trained", train.model, {**dargs, **adv}, train.round_epochs, base["export"], resume)
    by_family = {fam: fit_once(out / f"family-{fam}", train.model, {**dargs, **adv, "adversarial_families": [fam]},
                               train.round_epochs, base["export"], resume)
                 for fam in train.generalization}
    return {"base": base, "trained": trained, "by_family": by_family,
            "train_attacks": sorted(a.name for a in train_attacks), "held_out": sorted(held),
            "train_contexts_attacked": len(pool),
            "examples_added_by_family": dict(sorted(fooled_by_family.items()))}, victim
