"""``robusteval train``: LightningCLI over the trainable evaluators and the data module.

    robusteval train fit --config configs/train/cross_encoder_minilm.yaml
    robusteval train fit --config configs/train/cross_encoder_minilm.yaml --ckpt_path <run>/checkpoints/last.ckpt
    robusteval train test --config ... --ckpt_path ...
    robusteval train fit --config ... --print_config

The model is chosen in the config (``model.class_path``: ``robusteval.training.CrossEncoderModule``
or ``robusteval.training.BoolQAModule``). Every run gets, unless the config says otherwise:
the pickle-free checkpoint plugin (:class:`~robusteval.training.checkpoint_io.SafeCheckpointIO`),
a ``last.ckpt`` saved after every epoch (adapter and head only) to resume from after a kill,
a CSV logger, and an export of the trained evaluator at the end of fitting.

SIGTERM (a scheduler's time limit, ``kill``): Lightning finishes the batch in hand and stops;
the command then exits with status 143 and names the checkpoint to resume from, instead of
Lightning's default exit status 0, which would tell a scheduler the training succeeded.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

from lightning.pytorch import Trainer
from lightning.pytorch.callbacks import Callback, ModelCheckpoint
from lightning.pytorch.cli import LightningCLI
from lightning.pytorch.utilities.exceptions import SIGTERMException
from robusteval.training.base import EvaluatorModule
from robusteval.training.checkpoint_io import SafeCheckpointIO
from robusteval.training.data import ScoringDataModule

from robusteval.results import distributed_helper, exclusive_folder
from robusteval.signals import Terminated, default_sigterm


class TrainCLI(LightningCLI):
    """LightningCLI with robusteval's checkpointing defaults."""

    def _instantiate_trainer(self, config: dict[str, Any], callbacks: list[Callback]) -> Trainer:
        plugins = config.get("plugins") or []
        plugins = plugins if isinstance(plugins, list) else [plugins]
        if not any(isinstance(p, SafeCheckpointIO) for p in plugins):
            plugins.append(SafeCheckpointIO())
        config["plugins"] = plugins
        existing = config.get("callbacks") or []
        if not any(isinstance(c, ModelCheckpoint) for c in (existing if isinstance(existing, list) else [existing])):
            callbacks = [*callbacks, ModelCheckpoint(save_last=True, save_top_k=1, every_n_epochs=1)]
        return super()._instantiate_trainer(config, callbacks)

    def _run_subcommand(self, subcommand: str) -> None:
        with contextlib.ExitStack() as held:
            for folder in self.written_folders(subcommand):
                held.enter_context(exclusive_folder(folder))
            try:
                super()._run_subcommand(subcommand)
            except SIGTERMException:
                raise Terminated(resume_hint(self.trainer, subcommand)) from None

    def written_folders(self, subcommand: str) -> list[str]:
        """The folders this command holds under their writer lock while it runs
        (:func:`robusteval.results.exclusive_folder`), as every other command holds its
        ``--out-dir``: for ``fit``, the model's ``export_dir`` when the config names one. Two
        runs exporting into one folder would otherwise write one evaluator over the other;
        the second is refused before it trains. The log directory is Lightning's: a new version
        folder per run unless the config fixes one (a lock file in it would make the logger warn
        that the folder is not empty). A distributed trainer's other processes work for the one
        that holds the lock."""
        export = getattr(self.model, "export_dir", None)
        # a launcher's extra processes: Lightning's own (LOCAL_RANK/RANK set) or a cluster's, whose
        # rank the trainer's cluster environment reads (SLURM_PROCID under srun, LSF, MPI)
        if subcommand != "fit" or not export or distributed_helper() or self.trainer.global_rank != 0:
            return []
        return [str(export)]


def resume_hint(trainer: Trainer, subcommand: str) -> str:
    """Where a stopped ``fit`` can go on from: the last epoch checkpoint, if one was saved."""
    if subcommand != "fit":
        return "nothing to resume; rerun the same command"
    callback = trainer.checkpoint_callback
    last = getattr(callback, "last_model_path", "") or getattr(callback, "best_model_path", "")
    if not last:
        return "no epoch finished, so no checkpoint was saved; rerun the same command"
    return f"the last saved epoch is {last}; rerun the same command with --ckpt_path {last} to continue"


def trainer_defaults() -> dict[str, Any]:
    return {"logger": {"class_path": "lightning.pytorch.loggers.CSVLogger",
                       "init_args": {"save_dir": "runs/train"}},
            "max_epochs": 3, "log_every_n_steps": 10, "enable_model_summary": False,
            "accelerator": "auto", "deterministic": False}


def main(argv: Sequence[str] | None = None) -> int:
    with default_sigterm():  # Lightning's handler alone decides what a SIGTERM does
        TrainCLI(EvaluatorModule, ScoringDataModule, subclass_mode_model=True, args=list(argv or []),
                 trainer_defaults=trainer_defaults(), seed_everything_default=0,
                 save_config_kwargs={"overwrite": True}, parser_kwargs={"prog": "robusteval train"},
                 auto_configure_optimizers=False)
    return 0
