"""What every trainable evaluator shares: losses, validation metrics, adapter-only checkpoints.

Subclasses implement :meth:`EvaluatorModule.predict` (scores in [0, 1], higher is better, for
a list of samples, with gradients: exactly what the exported metric computes) and
:meth:`EvaluatorModule.export` (a folder the matching robusteval metric loads); for the
embedding adversary also :meth:`~EvaluatorModule.embed` (input embeddings of a batch) and
:meth:`~EvaluatorModule.predict_embeds` (scores from such embeddings).

Losses, per kind of training item (:class:`robusteval.training.data.Item`):

* ``mse`` — every item against its target (human score, 0 for an R− example or a negative,
  1 for a self-supervised positive, the original's target for an R+ rewrite); with
  ``adv_point_loss=False`` adversarial examples get no point target, only the relative
  losses below (an R− text is known to be worse than its original, not to be worth 0);
* ``margin`` — an R− adversarial example or a self-supervised negative must score at least
  ``margin`` below the text it was made from (``margin_weight``);
* ``consistency`` — an R+ rewrite (meaning kept) is tied to its original's score: the squared
  difference, weighted by ``consistency_weight`` (0 turns it off). This is what keeps
  adversarial training from learning "unusual wording → lower score";
* ``embedding adversary`` (``embed_adv_weight`` > 0; SMART, Jiang et al. 2020, and FreeLB,
  Zhu et al. 2020, style) — the clean items' input embeddings are perturbed within an L2 ball
  of radius ``embed_eps`` per token (``embed_steps`` ascent steps from a random start), and
  the squared change of the score under the worst perturbation found is penalized.

``loss`` selects the first two (``mse``, ``margin`` or ``mse+margin``); the other two are
switched by their weights.

Validation / test log Spearman with the human targets per dataset (``val_spearman`` is the
mean over datasets; a set the model scores constantly counts 0, a set with one rating or at
most two rows is left out, and without such sets no Spearman is logged) and ``val_asr``: the
share of held-out R− adversarial examples that the model scores at least as high as their
originals (the beats-reference criterion),
``val_invariance_failures`` on held-out R+ rewrites and, for self-supervised pairs,
``val_ssl_accuracy`` (negatives scored below their positive, overall and per negative kind).
Checkpoints
keep only trainable parameters (LoRA adapters and the head), and the
:class:`~robusteval.training.checkpoint_io.SafeCheckpointIO` plugin writes them without
pickles. Each training step reseeds torch from (``seed``, step), and the data order depends
only on (seed, epoch), so a run resumed from an epoch checkpoint ends in the same state as an
uninterrupted one.
"""

from __future__ import annotations

import warnings
from abc import abstractmethod
from collections import defaultdict
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import numpy as np
import torch

from robusteval.errors import RobustevalError
from robusteval.types import Sample

LOSSES = ("mse", "margin", "mse+margin")
MARGIN_KINDS = ("adv-", "ssl-")  # paired items that must score below their original


class EvaluatorModule(pl.LightningModule):
    """Base LightningModule of robusteval's trainable evaluators."""

    def __init__(self, loss: str = "mse+margin", margin: float = 0.1, margin_weight: float = 1.0,
                 lr: float = 2e-4, weight_decay: float = 0.01, seed: int = 0, export_dir: str | None = None,
                 consistency_weight: float = 1.0, embed_adv_weight: float = 0.0, embed_eps: float = 0.01,
                 embed_steps: int = 1, adv_point_loss: bool = True) -> None:
        super().__init__()
        if loss not in LOSSES:
            raise RobustevalError(f"loss must be one of {LOSSES}, got {loss!r}")
        if consistency_weight < 0 or embed_adv_weight < 0 or embed_eps <= 0 or embed_steps < 1:
            raise RobustevalError("consistency_weight and embed_adv_weight must be >= 0, embed_eps > 0, "
                                  "embed_steps >= 1")
        self.loss_kind, self.margin, self.margin_weight = loss, margin, margin_weight
        self.consistency_weight, self.embed_adv_weight = consistency_weight, embed_adv_weight
        self.embed_eps, self.embed_steps = embed_eps, embed_steps
        self.adv_point_loss = adv_point_loss
        self.lr, self.weight_decay, self.seed, self.export_dir = lr, weight_decay, seed, export_dir
        self.strict_loading = False  # checkpoints hold the trainable parameters only
        self._eval_rows: list[dict[str, Any]] = []
        # the rated items of the last validation / test pass, per prefix: what a paired change of
        # Spearman between two models is computed from (robusteval.training.rounds)
        self.eval_scores: dict[str, list[dict[str, Any]]] = {}

    # -- to implement -------------------------------------------------------------------
    @abstractmethod
    def predict(self, samples: list[Sample]) -> torch.Tensor:
        """Scores in [0, 1] (higher is better), differentiable."""

    def embed(self, samples: list[Sample]) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Input embeddings of ``samples`` (batch, length, width) and the other tensors
        :meth:`predict_embeds` needs, batch first (the attention mask...)."""
        raise RobustevalError(f"{type(self).__name__} has no embedding hook: set embed_adv_weight: 0")

    def predict_embeds(self, embeds: torch.Tensor, extra: dict[str, torch.Tensor]) -> torch.Tensor:
        """Scores in [0, 1] (higher is better) from input embeddings, differentiable."""
        raise RobustevalError(f"{type(self).__name__} has no embedding hook: set embed_adv_weight: 0")

    @abstractmethod
    def export(self, folder: str | Path) -> Path:
        """Write a folder the matching robusteval metric loads; return it."""

    # -- training -----------------------------------------------------------------------
    def on_train_batch_start(self, batch: Any, batch_idx: int) -> None:
        # dropout masks depend only on (seed, step): a resumed run repeats them exactly, whatever
        # else drew random numbers before (data loader iterators draw a seed when created)
        torch.manual_seed(self.seed * 1_000_003 + self.global_step)

    def losses(self, batch: dict[str, Any]) -> dict[str, torch.Tensor]:
        items = batch["items"]
        pred = self.predict([it.sample for it in items])
        out: dict[str, torch.Tensor] = {}
        if "mse" in self.loss_kind:
            target = batch["target"].to(pred.device)
            point = [i for i, it in enumerate(items) if self.adv_point_loss or it.kind not in ("adv-", "adv+")]
            if point:
                out["mse"] = self.point_loss(pred[point], target[point])
        below = ([i for i, it in enumerate(items) if it.original is not None and it.kind in MARGIN_KINDS]
                 if "margin" in self.loss_kind else [])
        same = [i for i, it in enumerate(items) if it.original is not None and it.kind == "adv+"]
        paired = below + (same if self.consistency_weight > 0 else [])
        orig = self.predict([items[i].original for i in paired]) if paired else pred[:0]  # type: ignore[misc]
        if below:
            gap = orig[: len(below)] - pred[below]
            out["margin"] = self.margin_weight * torch.relu(self.margin - gap).mean()
        if self.consistency_weight > 0 and same:
            out["consistency"] = self.consistency_weight * ((pred[same] - orig[len(below):]) ** 2).mean()
        if self.embed_adv_weight > 0:
            clean = [items[i].sample for i, it in enumerate(items) if it.kind in ("human", "ssl+")]
            if clean:
                out["embed_adv"] = self.embed_adv_weight * self.embedding_adversary(*self.embed(clean))
        if not out:  # margin-only loss on a batch without pairs
            out["margin"] = pred.sum() * 0.0
        return out

    def embedding_adversary(self, embeds: torch.Tensor, extra: dict[str, torch.Tensor]) -> torch.Tensor:
        """SMART / FreeLB-style smoothness penalty: the squared score change under the worst
        perturbation of the input embeddings found by ``embed_steps`` normalized-gradient
        ascent steps within an L2 ball of radius ``embed_eps`` per token (random start)."""
        clean = self.predict_embeds(embeds, extra)
        base = embeds.detach()
        target = clean.detach()
        delta = torch.randn_like(base)
        delta = self.embed_eps * delta / delta.norm(dim=-1, keepdim=True).clamp(min=1e-12) * 0.5
        for _ in range(self.embed_steps):
            delta.requires_grad_(True)
            gap = ((self.predict_embeds(base + delta, extra) - target) ** 2).sum()
            (grad,) = torch.autograd.grad(gap, delta)
            delta = delta.detach() + self.embed_eps * grad / grad.norm(dim=-1, keepdim=True).clamp(min=1e-12)
            norm = delta.norm(dim=-1, keepdim=True)
            delta = delta * torch.clamp(self.embed_eps / norm.clamp(min=1e-12), max=1.0)
        # gradients flow through the model's weights and the clean embeddings (the whole graph)
        return ((self.predict_embeds(embeds + delta.detach(), extra) - clean) ** 2).mean()

    def point_loss(self, pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """Loss of each prediction against its target (squared error here)."""
        return torch.nn.functional.mse_loss(pred, target)

    def training_step(self, batch: dict[str, Any], batch_idx: int) -> torch.Tensor:
        parts = self.losses(batch)
        loss = sum(parts.values())
        for k, v in parts.items():
            self.log(f"train_{k}", v, batch_size=len(batch["items"]))
        self.log("train_loss", loss, prog_bar=True, batch_size=len(batch["items"]))
        return loss  # type: ignore[return-value]

    def configure_optimizers(self) -> torch.optim.Optimizer:
        params = [p for p in self.parameters() if p.requires_grad]
        if not params:
            raise RobustevalError("no trainable parameters")
        return torch.optim.AdamW(params, lr=self.lr, weight_decay=self.weight_decay)

    def trainable_share(self) -> tuple[int, int]:
        """(trainable parameters, all parameters)."""
        return (sum(p.numel() for p in self.parameters() if p.requires_grad),
                sum(p.numel() for p in self.parameters()))

    # -- evaluation -----------------------------------------------------------------------
    def _collect(self, batch: dict[str, Any]) -> None:
        items = batch["items"]
        with torch.no_grad():
            pred = self.predict([it.sample for it in items]).float().cpu().numpy()
            paired = [i for i, it in enumerate(items) if it.original is not None]
            orig = (self.predict([items[i].original for i in paired]).float().cpu().numpy()  # type: ignore[misc]
                    if paired else np.zeros(0))
        o = dict(zip(paired, orig, strict=True))
        for i, it in enumerate(items):
            self._eval_rows.append({"kind": it.kind, "dataset": it.dataset, "family": it.family,
                                    "pred": float(pred[i]), "target": it.target, "orig": o.get(i),
                                    "conversation": it.sample.conversation_key(),
                                    "key": "|".join(str(x) for x in (
                                        it.kind, it.dataset, it.family, it.attack, it.sample.id, it.sample.response,
                                        it.original.response if it.original is not None else None))})

    def validation_step(self, batch: dict[str, Any], batch_idx: int) -> None:
        self._collect(batch)

    def test_step(self, batch: dict[str, Any], batch_idx: int) -> None:
        self._collect(batch)

    def on_validation_epoch_end(self) -> None:
        self._log_eval("val")

    def on_test_epoch_end(self) -> None:
        self._log_eval("test")

    def _log_eval(self, prefix: str) -> None:
        from scipy.stats import spearmanr

        rows, self._eval_rows = self._all_ranks(self._eval_rows), []
        by_ds: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for r in rows:
            if r["kind"] == "human":
                by_ds[r["dataset"]].append(r)
        self.eval_scores[prefix] = [{k: r[k] for k in ("key", "dataset", "conversation", "pred", "target")}
                                    for r in rows if r["kind"] == "human"]
        rhos = []
        for ds, group in sorted(by_ds.items()):
            if len(group) > 2 and len({g["target"] for g in group}) > 1:
                rho = float(spearmanr([g["pred"] for g in group], [g["target"] for g in group]).statistic)
                # constant predictions rank nothing: 0, so a collapsed model never passes the round gate
                rho = 0.0 if np.isnan(rho) else rho
                rhos.append(rho)
                self.log(f"{prefix}_spearman/{ds}", rho)
        if rhos:  # no rated rows (self-supervised pre-training): no Spearman at all, never a silent 0
            self.log(f"{prefix}_spearman", float(np.mean(rhos)), prog_bar=True)
        from robusteval.attacks.criteria import Criteria
        from robusteval.stats import proportion

        crit = Criteria()  # the runner's default thresholds, here on the model's 0-1 scale
        adv = [r for r in rows if r["kind"] == "adv-" and r["orig"] is not None]
        if adv:
            # the expectation criterion on held-out R- examples: fooled when the model does not
            # score the adversarial text below its original (the runner's tie test on 0-100, the
            # same rate function as every ASR)
            fooled = [crit.at_least(100.0 * r["pred"], 100.0 * r["orig"]) for r in adv]
            self.log(f"{prefix}_asr", float(proportion(fooled)["rate"]), prog_bar=True)
            fams: dict[str, list[bool]] = defaultdict(list)
            for r, hit in zip(adv, fooled, strict=True):
                fams[r["family"] or "unknown"].append(hit)
            for fam, hits in sorted(fams.items()):
                self.log(f"{prefix}_asr/{fam}", float(proportion(hits)["rate"]))
        ssl = [r for r in rows if r["kind"] == "ssl-" and r["orig"] is not None]
        if ssl:  # self-supervised pairs: how often a negative scores below its positive
            self.log(f"{prefix}_ssl_accuracy", float(np.mean([r["pred"] < r["orig"] for r in ssl])))
            kinds: dict[str, list[bool]] = defaultdict(list)
            for r in ssl:
                kinds[r["family"] or "unknown"].append(r["pred"] < r["orig"])
            for kind, hits in sorted(kinds.items()):
                self.log(f"{prefix}_ssl_accuracy/{kind}", float(np.mean(hits)))
        same = [r for r in rows if r["kind"] == "adv+" and r["orig"] is not None]
        if same:
            # robusteval's invariance criterion on held-out R+ rewrites (score on 0-100 moved by
            # more than the tolerance), as the attack runner counts it
            tol = crit.invariance_tolerance / 100.0
            self.log(f"{prefix}_invariance_failures",
                     float(proportion([abs(r["pred"] - r["orig"]) > tol for r in same])["rate"]))

    def _all_ranks(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Every rank's evaluation rows (under DDP each rank saw a shard, and the distributed
        sampler pads the shards with repeats): gathered, each item once, in a fixed order, so
        Spearman and the rates are computed on the whole split by every rank alike. An item is
        known by its kind, dataset, family, attack, sample id and texts: two items equal in all
        of these (which give equal rows) count once under DDP and twice on one device."""
        world = getattr(self._trainer, "world_size", 1) if self._trainer is not None else 1
        if world <= 1 or not torch.distributed.is_available() or not torch.distributed.is_initialized():
            return rows
        parts: list[Any] = [None] * world
        torch.distributed.all_gather_object(parts, rows)
        seen: dict[str, dict[str, Any]] = {}
        for part in parts:
            for r in part or []:
                seen.setdefault(r["key"], r)
        return [seen[k] for k in sorted(seen)]

    # -- checkpoints ----------------------------------------------------------------------
    @classmethod
    def load_from_checkpoint(cls, checkpoint_path: Any, map_location: Any = None, hparams_file: Any = None,
                             strict: bool | None = None, **kwargs: Any) -> Any:
        """Lightning's ``load_from_checkpoint`` for robusteval's checkpoint *folders* too.

        Lightning reads a checkpoint with ``torch.load`` on one file, so the folders
        :class:`~robusteval.training.checkpoint_io.SafeCheckpointIO` writes (``last.ckpt/``
        holding ``state.json`` + ``tensors.safetensors``) failed with ``IsADirectoryError``.
        Here a folder is read by that plugin and rebuilt by Lightning's own loader (the saved
        hyper-parameters, ``kwargs`` overriding them, then the trainable weights). An export
        folder (``scorer.json``) is loaded as the module's ``checkpoint=``. A file goes to
        Lightning unchanged. A folder must hold every trainable weight of the module and
        nothing else, unless ``strict=False``: then a mismatch is a warning naming the weights
        and the rest is loaded."""
        path = Path(checkpoint_path) if isinstance(checkpoint_path, str | Path) else None
        if path is None or not path.is_dir():
            return super().load_from_checkpoint(checkpoint_path, map_location=map_location,  # type: ignore[misc]
                                                hparams_file=hparams_file, strict=strict, **kwargs)
        if (path / "scorer.json").is_file() and not (path / "state.json").is_file():
            if cls is EvaluatorModule:
                raise RobustevalError(f"{path} is an export: load it with the module class that wrote it "
                                      "(e.g. CrossEncoderModule.load_from_checkpoint)")
            return cls(checkpoint=str(path), **kwargs)  # type: ignore[call-arg]
        from lightning.pytorch.core.saving import _load_state, load_hparams_from_yaml
        from robusteval.training.checkpoint_io import SafeCheckpointIO

        checkpoint = SafeCheckpointIO().load_checkpoint(path, map_location=map_location)
        if hparams_file is not None:
            checkpoint[cls.CHECKPOINT_HYPER_PARAMS_KEY] = load_hparams_from_yaml(hparams_file)
        checkpoint.setdefault(cls.CHECKPOINT_HYPER_PARAMS_KEY, {}).update(kwargs)
        # built and filled by Lightning (hyper-parameters, LightningCLI's class path, then
        # on_load_checkpoint and the weights); a checkpoint holds the trainable weights only, so
        # Lightning's list of the frozen ones it lacks is noise, and every trainable one must be there
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Found keys that are in the model state dict but not")
            model = _load_state(cls, checkpoint, **kwargs)
        have = set(checkpoint.get("state_dict") or {})
        lost = sorted(n for n, p in model.named_parameters() if p.requires_grad and n not in have)
        unexpected = sorted(have - set(model.state_dict()))
        if lost or unexpected:
            msg = (f"{path}: the checkpoint does not match {type(model).__name__} "
                   f"(trainable weights missing: {lost[:3]}{' ...' if len(lost) > 3 else ''}, "
                   f"unexpected: {unexpected[:3]}{' ...' if len(unexpected) > 3 else ''})")
            if strict is False:  # the caller asked for a partial load (e.g. a new head on old adapters)
                warnings.warn(f"{msg}; loaded anyway (strict=False): the missing weights keep their "
                              "initial values, the unexpected ones are ignored", stacklevel=2)
            else:
                raise RobustevalError(msg)
        return model

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """A checkpoint loaded into a trainer whose data module splits data
        (:class:`~robusteval.training.data.ScoringDataModule`) continues only on the split it
        was written with: the scheme it recorded is checked here, where the whole checkpoint is
        seen (Lightning hands a data module its state only when the checkpoint has one)."""
        trainer = getattr(self, "_trainer", None)
        dm = getattr(trainer, "datamodule", None) if trainer is not None else None
        check = getattr(dm, "check_split", None)
        if callable(check):
            check((checkpoint.get(type(dm).__qualname__) or {}).get("split_scheme"))

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        keep = {n for n, p in self.named_parameters() if p.requires_grad}
        checkpoint["state_dict"] = {k: v for k, v in checkpoint["state_dict"].items() if k in keep}

    def on_train_end(self) -> None:
        folder = self.export_dir or (Path(self.trainer.log_dir or self.trainer.default_root_dir) / "export")
        if self.trainer.is_global_zero:
            path = self.export(folder)
            print(f"exported the trained evaluator to {path}")
