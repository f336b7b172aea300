"""What every trainable evaluator shares: losses, validation metrics, adapter-only checkpoints.

Subclasses implement :meth:`EvaluatorModule.predict` (scores in [0, 1], higher is better, for
a list of samples, with gradients) and :meth:`EvaluatorModule.export` (a folder the matching
robusteval metric loads).

* Losses (``loss``): ``mse`` against the target, ``margin`` (an R− adversarial example must
  score at least ``margin`` below the text it was made from), or ``mse+margin``.
* Validation / test log Spearman with the human targets per dataset (``val_spearman`` is the
  mean over datasets) and ``val_asr``: the share of held-out R− adversarial examples that the
  model scores at least as high as their originals (the beats-reference criterion).
* Checkpoints keep only trainable parameters (LoRA adapters and the head), and the
  :class:`~robusteval.training.checkpoint_io.SafeCheckpointIO` plugin writes them without
  pickles. Each training step reseeds torch from (``seed``, step), and the data order depends
  only on (seed, epoch), so a run resumed from an epoch checkpoint ends in the same state as
  an uninterrupted one.
"""

from __future__ import annotations

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


class EvaluatorModule(pl.LightningModule):
    """Base LightningModule of robusteval's trainable evaluators."""

    def __init__(self, loss: str = "mse+margin", margin: float = 0.1, margin_weight: float = 1.0,
                 lr: float = 2e-4, weight_decay: float = 0.01, seed: int = 0, export_dir: str | None = None) -> None:
        super().__init__()
        if loss not in LOSSES:
            raise RobustevalError(f"loss must be one of {LOSSES}, got {loss!r}")
        self.loss_kind, self.margin, self.margin_weight = loss, margin, margin_weight
        self.lr, self.weight_decay, self.seed, self.export_dir = lr, weight_decay, seed, export_dir
        self.strict_loading = False  # checkpoints hold the trainable parameters only
        self._eval_rows: list[dict[str, Any]] = []

    # -- to implement -------------------------------------------------------------------
    @abstractmethod
    def predict(self, samples: list[Sample]) -> torch.Tensor:
        """Scores in [0, 1] (higher is better), differentiable."""

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
            out["mse"] = self.point_loss(pred, batch["target"].to(pred.device))
        paired = [i for i, it in enumerate(items) if it.original is not None]
        if "margin" in self.loss_kind and paired:
            orig = self.predict([items[i].original for i in paired])  # type: ignore[misc]
            gap = orig - pred[paired]
            out["margin"] = self.margin_weight * torch.relu(self.margin - gap).mean()
        if not out:  # margin-only loss on a batch without pairs
            out["margin"] = pred.sum() * 0.0
        return out

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
                                    "pred": float(pred[i]), "target": it.target, "orig": o.get(i)})

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

        rows, self._eval_rows = self._eval_rows, []
        by_ds: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for r in rows:
            if r["kind"] == "human":
                by_ds[r["dataset"]].append(r)
        rhos = []
        for ds, group in sorted(by_ds.items()):
            if len(group) > 2 and len({g["target"] for g in group}) > 1:
                rho = float(spearmanr([g["pred"] for g in group], [g["target"] for g in group]).statistic)
                rho = 0.0 if np.isnan(rho) else rho
                rhos.append(rho)
                self.log(f"{prefix}_spearman/{ds}", rho)
        self.log(f"{prefix}_spearman", float(np.mean(rhos)) if rhos else 0.0, prog_bar=True)
        adv = [r for r in rows if r["kind"] == "adv-" and r["orig"] is not None]
        if adv:
            from robusteval.stats import proportion

            # the expectation criterion on held-out R- examples: fooled when the model does not
            # score the adversarial text below its original (the same rate function as every ASR)
            self.log(f"{prefix}_asr", float(proportion([r["pred"] >= r["orig"] for r in adv])["rate"]),
                     prog_bar=True)
            fams: dict[str, list[bool]] = defaultdict(list)
            for r in adv:
                fams[r["family"] or "unknown"].append(r["pred"] >= r["orig"])
            for fam, hits in sorted(fams.items()):
                self.log(f"{prefix}_asr/{fam}", float(proportion(hits)["rate"]))

    # -- checkpoints ----------------------------------------------------------------------
    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        keep = {n for n, p in self.named_parameters() if p.requires_grad}
        checkpoint["state_dict"] = {k: v for k, v in checkpoint["state_dict"].items() if k in keep}

    def on_train_end(self) -> None:
        folder = self.export_dir or (Path(self.trainer.log_dir or self.trainer.default_root_dir) / "export")
        if self.trainer.is_global_zero:
            path = self.export(folder)
            print(f"exported the trained evaluator to {path}")
