"""Training the learned victims of a comparison: base, adversarially trained, per family, ablations.

For a victim with a ``train:`` block, through the one round loop of
:mod:`robusteval.training.rounds`:

* ``base`` — round 0: optional self-supervised pre-training, then the human judgments of the
  train split (or ``train.checkpoint``, measured as is); it is the *plain* variant;
* ``trained`` — adversarial rounds from the base: each attacks the current model on the train
  contexts with the training attacks and trains on what fooled it; the model kept is the best
  on the validation objective (clean Spearman, ASR on the validation contexts) among rounds
  that keep validation Spearman within the tolerance;
* ``family-<X>`` — one round on family X's examples alone, from attacking the base (the
  generalization matrix: train on X, attack with Y);
* ``ablation-<name>`` — the same rounds with one part off: ``no-consistency`` (R+ rewrites
  lose their consistency loss), ``no-embedding-adversary``, ``offline`` (examples from
  attacking the base only).

Every model folder records ``fit.json`` when its training finished; a resumed comparison
reuses finished models and retrains unfinished ones from scratch (same seed, same result).
"""

from __future__ import annotations

import contextlib
import logging
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from robusteval.compare.config import CompareConfig, SuiteSpec, TrainSpec
from robusteval.errors import RobustevalError
from robusteval.training.rounds import RoundsSpec, adversarial_rounds, measure, round_settings, train_base
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


def model_seeded(train: TrainSpec, cfg: CompareConfig) -> dict[str, Any]:
    """The model's arguments with the config's seed (the per-step dropout reseeding): the model
    and the data module share one seed, as Lightning requires of hyperparameters both declare;
    without it every seed but 0 stopped at the first training step."""
    given = train.model.get("seed", cfg.seed)
    if given != cfg.seed:
        raise RobustevalError(f"compare config: train.model.seed ({given}) differs from the seed of the run "
                              f"({cfg.seed}); set the top-level seed (or --seed / --seeds) only")
    return {**train.model, "seed": cfg.seed}


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


def variant_settings(train: TrainSpec, ablation: str | None = None) -> tuple[dict[str, Any], RoundsSpec]:
    """Module arguments and round settings of the trained variant, or of one ablation of it."""
    model, spec = round_settings(train.model, {"epochs": train.round_epochs, "train_limit": train.train_limit,
                                               **train.rounds})
    if ablation == "no-consistency":
        model["consistency_weight"] = 0.0
    elif ablation == "no-embedding-adversary":
        model["embed_adv_weight"] = 0.0
    elif ablation == "offline":
        spec = replace(spec, online=False)
    elif ablation is not None:
        raise RobustevalError(f"unknown ablation {ablation!r}")
    return model, spec


def training_attacks(train: TrainSpec, suite: SuiteSpec, cfg: CompareConfig,
                     all_attack_names: Sequence[str]) -> list[Any]:
    """The attacks a learned victim trains on: ``train.attacks`` (default: the suite's), fresh,
    minus the ``held_out`` families."""
    from robusteval import attacks

    chosen = attacks.select(train.attacks or list(all_attack_names), cfg.seed, suite.attack_options)
    return [a for a in chosen if a.family not in set(train.held_out)]


def train_victim(train: TrainSpec, suite: SuiteSpec, cfg: CompareConfig, pools: dict[str, Sequence[Sample]],
                 all_attack_names: Sequence[str], out: Path, resume: bool, data_dir: str | None,
                 load: Callable[[str], Any]) -> tuple[dict[str, Any], Any]:
    """Base, trained, per-family and ablation models (see the module docstring), all through
    the one round loop of :mod:`robusteval.training.rounds`. ``pools`` holds the suite's
    ``train`` and ``val`` contexts. Returns the records (exports, validation and test metrics,
    rounds) and the base as a metric (``load(export)``): the comparison's plain variant."""
    dargs = data_args(train, suite, cfg, data_dir)
    train = replace(train, model=model_seeded(train, cfg))
    kind = train.module
    with quiet_lightning():
        if train.checkpoint:
            base = measure(out / "base", kind, train.checkpoint, train.model, dargs, resume)
        else:
            base = train_base(out / "base", kind, train.model, dargs, train.epochs, train.pretrain, resume)
    held = set(train.held_out)
    train_attacks = training_attacks(train, suite, cfg, all_attack_names)
    unknown = set(train.generalization) - {a.family for a in train_attacks}
    if unknown:
        raise RobustevalError(f"generalization families {sorted(unknown)} are not among the training attacks' "
                              "families (or are held out)")
    reuse: dict[str, Any] = {}

    def harden(folder: str, model: dict[str, Any], spec: RoundsSpec) -> dict[str, Any]:
        with quiet_lightning():
            result = adversarial_rounds(out / folder, kind=kind, model_args=model, data_args=dargs, base=base,
                                        train_pool=pools["train"], val_pool=pools["val"], attacks=train_attacks,
                                        spec=spec, budget=cfg.budget, dataset=suite.dataset, criteria=cfg.criteria,
                                        resume=resume, reuse=reuse)
        chosen_round = result["chosen"]
        return {"export": chosen_round["export"], "chosen_round": chosen_round["round"], "test": chosen_round["test"],
                "rounds": [{k: r[k] for k in ("round", "lr", "val_spearman", "val_sets", "val_asr", "val_asr_detail",
                                              "objective", "valid", "kept", "added")}
                           | ({"val_set_changes": r["val_set_changes"]} if "val_set_changes" in r else {})
                           for r in result["rounds"]]}

    model, spec = variant_settings(train)
    trained = harden("trained", model, spec)
    # the generalization matrix: one round on family X's examples from attacking the base
    by_family = {fam: harden(f"family-{fam}", model, replace(spec, families=[fam], rounds=1))
                 for fam in train.generalization}
    ablations = {}
    for name in train.ablations:
        amodel, aspec = variant_settings(train, name)
        ablations[name] = harden(f"ablation-{name}", amodel, aspec)
    return {"base": {"export": base.export, "val": base.val, "test": base.test}, "trained": trained,
            "by_family": by_family, "ablations": ablations, "module": kind,
            "train_attacks": sorted(a.name for a in train_attacks), "held_out": sorted(held),
            "train_contexts_attacked": len(list(pools["train"])[: spec.train_limit]),
            "val_contexts_attacked": len(list(pools["val"])[: spec.val_limit])}, load(base.export)
