"""The one adversarial-training loop of robusteval, used by ``robusteval harden`` and by the
learned victims of ``robusteval compare``.

* :func:`fit` trains one evaluator LightningModule (``kind``: ``cross-encoder`` or ``boolqa``,
  :data:`MODULES`) into a folder, with ``accelerator="auto"`` (a GPU when there is one), and
  records its validation and test metrics in ``fit.json`` and its validation predictions of
  the rated items in ``val_scores.json``; a finished folder is reused only under ``resume``.
* :func:`train_base` is round 0: optional self-supervised pre-training on dialogue contexts
  (:mod:`robusteval.training.ssl`), then fine-tuning on the human judgments.
* :func:`adversarial_rounds` runs rounds of *attack the current model on the train contexts →
  add the examples that fooled it → train further*, and chooses the checkpoint on a
  validation objective: clean Spearman on the validation split minus ``asr_weight`` × the ASR
  of the training attacks re-run against the round's model on the *validation* contexts. A
  round whose validation Spearman falls more than ``tolerance`` below the base's (with
  ``gate: every``, on any validation set) is never kept, whatever its ASR (:func:`choose`),
  and the next round continues from the last kept
  model with its learning rate multiplied by ``backoff`` (after any round that was not kept:
  the same step on the same examples would only repeat it). ``online: false`` attacks only the base (the offline
  ablation).

AdvEval (Chen et al. 2024, §4.4, Table 6) is the pattern: attack the evaluator, train on the
successful adversarial examples, attack again. The consistency loss for meaning-preserving
rewrites, the embedding adversary and the validation-gated choice are robusteval's (see
:mod:`robusteval.training.base`).
"""

from __future__ import annotations

import importlib
import json
import math
import shutil
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from robusteval.errors import RobustevalError
from robusteval.results import write_json
from robusteval.types import Sample

MODULES = {"cross-encoder": "robusteval.training.cross_encoder:CrossEncoderModule",
           "boolqa": "robusteval.training.boolqa:BoolQAModule"}


def module_class(kind: str) -> Any:
    if kind not in MODULES:
        raise RobustevalError(f"unknown evaluator module {kind!r} (known: {', '.join(MODULES)})")
    mod, _, name = MODULES[kind].partition(":")
    return getattr(importlib.import_module(mod), name)


def continued(kind: str, model_args: dict[str, Any], init: str | None) -> dict[str, Any]:
    """Module arguments that continue training the export ``init`` (or start fresh)."""
    if init is None:
        return dict(model_args)
    if kind == "boolqa":
        return {**model_args, "adapter": str(Path(init) / "adapter")}
    return {**model_args, "checkpoint": init}


def load_victim(kind: str, export: str, model_args: dict[str, Any], options: dict[str, Any] | None = None) -> Any:
    """The trained evaluator as a robusteval metric (what attacks query)."""
    from robusteval import metrics

    opts = {"device": "auto", **(options or {})}  # resolved where the victim is built (a Ray worker's GPU)
    if kind == "boolqa":
        return metrics.load("unieval", model=model_args["checkpoint"], adapter=str(Path(export) / "adapter"),
                            task=model_args.get("task", "dialogue"),
                            dimension=model_args.get("dimension", "naturalness"), **opts)
    return metrics.load("cross-encoder", **{**opts, "checkpoint": export})


@dataclass
class Fitted:
    """A trained model: its export folder and the metrics measured when training finished."""

    export: str
    init: str | None
    epochs: int
    val: dict[str, float] = field(default_factory=dict)
    test: dict[str, float] = field(default_factory=dict)
    # the validation pass's rated items and predictions (VAL_SCORES in the model's folder; None
    # for a folder written before they were kept)
    val_scores: str | None = None
    # where Lightning trained or measured it ("cpu", "cuda:0"; None for an older folder)
    device: str | None = None


VAL_SCORES = "val_scores.json"


def _validated(folder: Path, trainer: Any, module: Any, dm: Any) -> tuple[dict[str, Any], str | None]:
    """Validate ``module``: the logged metrics, and the path of the rated items' predictions
    (written to ``folder``/VAL_SCORES), or None without a validation split."""
    if not (dm.pool and dm.pool.items["val"]):
        return {}, None
    val = trainer.validate(module, dm, verbose=False)[0]
    write_json(folder / VAL_SCORES, module.eval_scores.get("val", []))
    return val, str(folder / VAL_SCORES)


def _reloaded(folder: Path, export: str) -> Fitted:
    """A finished folder's ``fit.json``, its paths pointing into the folder where it is now."""
    got = Fitted(**json.loads((folder / "fit.json").read_text(encoding="utf-8")))
    scores = folder / VAL_SCORES
    return replace(got, export=export, val_scores=str(scores) if scores.is_file() else None)


def fit(folder: Path, kind: str, model_args: dict[str, Any], data_args: dict[str, Any], epochs: int,
        init: str | None = None, resume: bool = False, accelerator: str = "auto") -> Fitted:
    """Train one model into ``folder`` (``export/``, logs, ``fit.json``, ``val_scores.json``). A finished folder is
    reused under ``resume`` and refused otherwise; an unfinished one starts again from scratch
    (same seed, same result on CPU; GPU kernels are not forced to be deterministic)."""
    done = folder / "fit.json"
    if done.is_file():
        if not resume:
            raise FileExistsError(f"{folder} holds a trained model: pass --resume to reuse it, or choose "
                                  "another --out-dir")
        # the export is this folder's own: read it from where the folder is now (a run folder
        # that was moved or copied resumes; the victim fingerprint names the weights, not the path)
        return _reloaded(folder, str(folder / "export"))
    if folder.exists():
        shutil.rmtree(folder)
    import lightning.pytorch as pl
    from lightning.pytorch.callbacks import ModelCheckpoint
    from lightning.pytorch.loggers import CSVLogger
    from robusteval.training.checkpoint_io import SafeCheckpointIO
    from robusteval.training.data import ScoringDataModule

    pl.seed_everything(int(data_args.get("seed", 0)), verbose=False)
    export = folder / "export"
    module = module_class(kind)(**{**continued(kind, model_args, init), "export_dir": str(export)})
    dm = ScoringDataModule(**data_args)
    trainer = pl.Trainer(max_epochs=epochs, default_root_dir=str(folder), plugins=[SafeCheckpointIO()],
                         callbacks=[ModelCheckpoint(save_last=True, save_top_k=1)],
                         logger=CSVLogger(str(folder), name="logs"), enable_model_summary=False,
                         accelerator=accelerator, log_every_n_steps=10)
    trainer.fit(module, dm)
    val, val_scores = _validated(folder, trainer, module, dm)
    test = trainer.test(module, dm, verbose=False)[0] if dm.pool and dm.pool.items["test"] else {}
    fitted = Fitted(export=str(export), init=init, epochs=epochs,
                    val={k: round(float(v), 6) for k, v in sorted(val.items())},
                    test={k: round(float(v), 6) for k, v in sorted(test.items())}, val_scores=val_scores,
                    device=str(trainer.strategy.root_device))
    write_json(done, asdict(fitted))
    return fitted


def measure(folder: Path, kind: str, export: str, model_args: dict[str, Any], data_args: dict[str, Any],
            resume: bool = False, accelerator: str = "auto") -> Fitted:
    """Validation and test metrics of an already trained export (a base given by checkpoint)."""
    done = folder / "fit.json"
    if done.is_file() and resume:  # measured before: the export is the one given now (it may have moved)
        return _reloaded(folder, export)
    import lightning.pytorch as pl
    from robusteval.training.data import ScoringDataModule

    module = module_class(kind)(**continued(kind, model_args, export))
    dm = ScoringDataModule(**data_args)
    dm.setup("validate")
    trainer = pl.Trainer(default_root_dir=str(folder), logger=False, enable_model_summary=False,
                         accelerator=accelerator, enable_checkpointing=False)
    folder.mkdir(parents=True, exist_ok=True)
    val, val_scores = _validated(folder, trainer, module, dm)
    test = trainer.test(module, dm, verbose=False)[0] if dm.pool and dm.pool.items["test"] else {}
    fitted = Fitted(export=export, init=None, epochs=0, val={k: round(float(v), 6) for k, v in sorted(val.items())},
                    test={k: round(float(v), 6) for k, v in sorted(test.items())}, val_scores=val_scores,
                    device=str(trainer.strategy.root_device))
    write_json(done, asdict(fitted))
    return fitted


def train_base(folder: Path, kind: str, model_args: dict[str, Any], data_args: dict[str, Any], epochs: int,
               pretrain: dict[str, Any] | None = None, resume: bool = False, accelerator: str = "auto") -> Fitted:
    """Round 0: ``pretrain`` (``{datasets, epochs, negatives, per_positive, limit}``, the
    self-supervised stage on dialogue contexts) and then fine-tuning on the human judgments of
    ``data_args``. Without ``pretrain`` only the second stage runs."""
    init = None
    if pretrain:
        unknown = set(pretrain) - {"datasets", "epochs", "negatives", "per_positive", "limit"}
        if unknown:
            raise RobustevalError(f"pretrain: unknown key(s) {sorted(unknown)}")
        if not pretrain.get("datasets"):
            raise RobustevalError("pretrain: needs datasets: [dialogue datasets whose contexts to use]")
        ssl_args = {**data_args, "datasets": [], "test_datasets": [], "adversarial": [],
                    "self_supervised": list(pretrain["datasets"]), "ssl_negatives": pretrain.get("negatives"),
                    "ssl_per_positive": int(pretrain.get("per_positive", 2)), "ssl_limit": pretrain.get("limit")}
        init = fit(folder / "pretrain", kind, model_args, ssl_args, int(pretrain.get("epochs", 1)), None, resume,
                   accelerator).export
        return fit(folder / "finetune", kind, model_args, data_args, epochs, init, resume, accelerator)
    return fit(folder, kind, model_args, data_args, epochs, None, resume, accelerator)


@dataclass
class RoundsSpec:
    """Settings of :func:`adversarial_rounds`."""

    rounds: int = 2
    epochs: int = 2  # training epochs per round
    online: bool = True  # re-attack the current model (False: attack the base only, once)
    tolerance: float = 0.02  # largest allowed drop of validation Spearman below the base's
    asr_weight: float = 1.0  # objective = val Spearman - asr_weight * val ASR
    train_limit: int | None = None  # train contexts attacked per round
    val_limit: int | None = None  # validation contexts attacked per round
    families: list[str] | None = None  # train on these families' examples only (generalization matrix)
    replay: float = 1.0  # share of the human-judged train items replayed in each round
    backoff: float = 0.5  # after a round that is not kept, the next one trains with lr x backoff
    gate: str = "mean"  # "mean": the mean validation Spearman within tolerance; "every": each validation set too

    @classmethod
    def from_config(cls, raw: dict[str, Any] | None) -> RoundsSpec:
        raw = dict(raw or {})
        unknown = set(raw) - set(cls.__dataclass_fields__)
        if unknown:
            raise RobustevalError(f"rounds: unknown key(s) {sorted(unknown)}; allowed: "
                                  f"{', '.join(sorted({*cls.__dataclass_fields__, *ROUND_LOSSES}))}")
        spec = cls(**raw)
        if spec.gate not in GATES:
            raise RobustevalError(f"rounds.gate must be one of {GATES}, got {spec.gate!r}")
        return spec


GATES = ("mean", "every")


# module arguments that only the adversarial rounds use (the base trains without them)
ROUND_LOSSES = ("consistency_weight", "embed_adv_weight", "embed_eps", "embed_steps", "margin", "margin_weight", "lr",
                "adv_point_loss")


def round_settings(model_args: dict[str, Any], raw: dict[str, Any] | None) -> tuple[dict[str, Any], RoundsSpec]:
    """A ``rounds:`` block split into the module arguments of the rounds (``ROUND_LOSSES``,
    layered over ``model_args``) and the :class:`RoundsSpec`."""
    raw = dict(raw or {})
    losses = {k: raw.pop(k) for k in ROUND_LOSSES if k in raw}
    return {**model_args, **losses}, RoundsSpec.from_config(raw)


def objective(val_spearman: float, val_asr: float | None, asr_weight: float) -> float:
    return val_spearman - asr_weight * (val_asr or 0.0)


def within_tolerance(base: dict[str, Any], record: dict[str, Any], tolerance: float, gate: str = "mean") -> bool:
    """Whether a round kept validity: its mean validation Spearman at most ``tolerance`` below
    the base's, and with ``gate="every"`` also each validation set's (``val_sets``; a set the
    round has no value for fails)."""
    if record["val_spearman"] < base["val_spearman"] - tolerance - 1e-12:
        return False
    if gate == "every":
        got = record.get("val_sets") or {}
        return all(got.get(k, float("-inf")) >= v - tolerance - 1e-12 for k, v in (base.get("val_sets") or {}).items())
    return True


def choose(records: Sequence[dict[str, Any]], tolerance: float, gate: str = "mean") -> int:
    """Index of the record to keep: the best ``objective`` among the base (index 0) and the
    rounds :func:`within_tolerance` of it. A round that trades validity for robustness beyond
    the tolerance is never chosen."""
    best = 0
    for i, r in enumerate(records[1:], start=1):
        if within_tolerance(records[0], r, tolerance, gate) and r["objective"] > records[best]["objective"]:
            best = i
    return best


def val_set_changes(base: Fitted, fitted: Fitted, n_boot: int = 1000, seed: int = 0) -> dict[str, dict[str, Any]]:
    """Per validation set, how the round's Spearman moved from the base's on the same rated
    items, with the paired interval (:func:`robusteval.metaeval.correlation_change`: one
    resampling of the set's conversations serves both models). Empty where either model's
    predictions were not kept (a folder made before they were). The gate itself compares the
    points (:func:`within_tolerance`); this says how far each point can be trusted."""
    from robusteval.metaeval import correlation_change

    if not base.val_scores or not fitted.val_scores:
        return {}
    before: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in json.loads(Path(base.val_scores).read_text(encoding="utf-8")):
        before.setdefault((r["dataset"], r["key"]), []).append(r)
    pairs: dict[str, list[tuple[dict[str, Any], dict[str, Any]]]] = {}
    seen: dict[tuple[str, str], int] = {}
    items: Counter[str] = Counter()  # rated items per set, both models' listings together
    for (ds, _), listed in before.items():
        items[ds] += len(listed)
    for r in json.loads(Path(fitted.val_scores).read_text(encoding="utf-8")):
        k = (r["dataset"], r["key"])
        items[r["dataset"]] += 1
        i = seen[k] = seen.get(k, -1) + 1  # an item listed twice pairs with the base's second listing
        if i < len(before.get(k, ())):
            pairs.setdefault(r["dataset"], []).append((before[k][i], r))
    out = {}
    for ds, pr in sorted(pairs.items()):
        change = correlation_change([b["pred"] for b, _ in pr], [a["pred"] for _, a in pr],
                                    [a["target"] for _, a in pr], [a["conversation"] for _, a in pr],
                                    n_boot=n_boot, seed=seed)
        entry = {k: change[k] for k in ("before", "after", "change", "ci", "ci_method", "n", "n_contexts")}
        # items one model scored and the other did not, or scored non-finite (which the gate's
        # Spearman keeps and correlation_change drops): the interval would not be about the
        # gate's number, so it is withheld and the counts say why
        entry["unpaired"] = items[ds] - 2 * len(pr)
        entry["nonfinite"] = sum(not (math.isfinite(b["pred"]) and math.isfinite(a["pred"])) for b, a in pr)
        if entry["unpaired"] or entry["nonfinite"]:
            entry["ci"] = None
        out[ds] = entry
    return out


def val_asr(kind: str, export: str, model_args: dict[str, Any], val_pool: Sequence[Sample], attacks: Sequence[Any],
            folder: Path, resume: bool, budget: int, dataset: str, criteria: Any) -> dict[str, Any]:
    """The training attacks re-run against ``export`` on the validation contexts: the primary
    ASR with its interval (:func:`robusteval.asr.overall`)."""
    from robusteval.asr import overall
    from robusteval.attacks.runner import run_attacks

    if not val_pool:
        return {"asr": None, "n": 0, "note": "no validation contexts"}
    log = run_attacks(val_pool, attacks, load_victim(kind, export, model_args), folder / "results.jsonl",
                      resume=resume, budget=budget, dataset=dataset, criteria=criteria)
    return overall(list(log))


def adversarial_rounds(folder: Path, *, kind: str, model_args: dict[str, Any], data_args: dict[str, Any],
                       base: Fitted, train_pool: Sequence[Sample], val_pool: Sequence[Sample],
                       attacks: Sequence[Any], spec: RoundsSpec, budget: int, dataset: str, criteria: Any,
                       resume: bool = False, accelerator: str = "auto",
                       reuse: dict[str, Any] | None = None) -> dict[str, Any]:
    """Rounds of attack → train, gated on validation (see the module docstring). Returns
    ``{"chosen": record, "rounds": [record per round, round 0 = base]}``; each record holds the
    export, the validation Spearman and ASR, the objective, whether the round passed the
    validity gate and whether it was kept, and the number of adversarial examples added.

    ``reuse`` (a dict the caller keeps between calls with the same attacks, pools and data)
    remembers which model was already attacked where: several hardened variants that start
    from one base (generalization matrix, ablations) attack that base once."""
    from robusteval.asr import as_row, training_example
    from robusteval.attacks.runner import run_attacks

    folder.mkdir(parents=True, exist_ok=True)
    if not attacks:
        raise RobustevalError("adversarial rounds need at least one training attack")

    memo = reuse if reuse is not None else {}

    def measured(k: int, fitted: Fitted) -> dict[str, Any]:
        if "val_spearman" not in fitted.val:  # before the validation attacks: refused without spending them
            raise RobustevalError(f"round {k}: no validation Spearman (no set of its validation split has more "
                                  "than two rated responses with two different ratings): the gate cannot compare "
                                  "rounds")
        key = f"val|{fitted.export}|{spec.val_limit}"
        if key not in memo:
            memo[key] = val_asr(kind, fitted.export, model_args, list(val_pool)[: spec.val_limit], attacks,
                                folder / f"round_{k}" / "val_attacks", resume, budget, dataset, criteria)
        v = memo[key]
        rho = float(fitted.val["val_spearman"])
        sets = {key.split("/", 1)[1]: float(v) for key, v in fitted.val.items() if key.startswith("val_spearman/")}
        return {"round": k, "export": fitted.export, "init": fitted.init, "val_spearman": rho, "val_sets": sets,
                "val_scores": fitted.val_scores,
                "val_asr": v.get("asr"), "val_asr_detail": v,
                "objective": objective(rho, v.get("asr"), spec.asr_weight),
                "test": fitted.test}

    import inspect

    if not 0 < spec.backoff <= 1:
        raise RobustevalError(f"rounds.backoff must be in (0, 1], got {spec.backoff}")
    if spec.gate not in GATES:
        raise RobustevalError(f"rounds.gate must be one of {GATES}, got {spec.gate!r}")
    lr = float(model_args.get("lr") or inspect.signature(module_class(kind)).parameters["lr"].default)
    records = [{**measured(0, base), "valid": True, "kept": True, "added": 0, "lr": None}]
    kept = 0
    adversarial: list[str] = []
    for k in range(1, spec.rounds + 1):
        if k > 1 and not records[-1]["kept"]:
            # the last round was not kept (it traded validity away, or did no better): retry from
            # the kept model with a smaller step (the same step on the same examples repeats it)
            lr *= spec.backoff
        rdir = folder / f"round_{k}"
        current = records[kept]["export"]
        if spec.online or k == 1:  # offline: the base's examples, attacked once, reused every round
            target = current if spec.online else base.export
            key = f"train|{target}|{spec.train_limit}"
            if key not in memo:
                log = run_attacks(list(train_pool)[: spec.train_limit], attacks, load_victim(kind, target, model_args),
                                  rdir / "train_attacks" / "results.jsonl", resume=resume, budget=budget,
                                  dataset=dataset, criteria=criteria)
                memo[key] = (str(rdir / "train_attacks"), [as_row(r) for r in log])
            where, rows = memo[key]
            if where in adversarial:  # the same model attacked again: its examples count once
                added = 0
            else:
                added = sum(training_example(r) and (spec.families is None or r.family in spec.families)
                            for r in rows)
                adversarial.append(where)
        else:
            added = 0
        dargs = {**data_args, "adversarial": list(adversarial), "only_successful": True,
                 "adversarial_families": spec.families, "human_share": spec.replay}
        fitted = fit(rdir / "model", kind, {**model_args, "lr": lr}, dargs, spec.epochs, current, resume, accelerator)
        rec = measured(k, fitted)
        rec["val_set_changes"] = val_set_changes(base, fitted, seed=int(data_args.get("seed", 0)))
        rec["lr"] = lr
        rec["valid"] = within_tolerance(records[0], rec, spec.tolerance, spec.gate)
        rec["added"] = added
        records.append(rec)
        best = choose(records, spec.tolerance, spec.gate)
        for i, r in enumerate(records):
            r["kept"] = i == best
        kept = best
        write_json(folder / "rounds.json", {"spec": asdict(spec), "rounds": records})
    write_json(folder / "rounds.json", {"spec": asdict(spec), "rounds": records})
    return {"chosen": records[kept], "rounds": records}
