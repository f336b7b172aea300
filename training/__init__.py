"""Adversarial LoRA fine-tuning of learned evaluators under Lightning (installs as
``robusteval.training``).

* :class:`ScoringDataModule` — human-judged samples plus adversarial JSONL, split by conversation;
* :class:`CrossEncoderModule` — a LoRA cross-encoder (MiniLM by default, any HF encoder, the
  PoE architecture); its export loads as the ``cross-encoder`` metric;
* :class:`BoolQAModule` — a LoRA UniEval-style Boolean-QA seq2seq evaluator;
* ``robusteval train`` (LightningCLI) and ``robusteval harden`` (attack -> train -> re-attack).

Importing this package loads no model; heavy imports happen when a module is built.
"""

from __future__ import annotations

from typing import Any

__all__ = ["BoolQAModule", "CrossEncoderModule", "EvaluatorModule", "ScoringDataModule"]


def __getattr__(name: str) -> Any:
    if name == "CrossEncoderModule":
        from robusteval.training.cross_encoder import CrossEncoderModule

        return CrossEncoderModule
    if name == "BoolQAModule":
        from robusteval.training.boolqa import BoolQAModule

        return BoolQAModule
    if name == "EvaluatorModule":
        from robusteval.training.base import EvaluatorModule

        return EvaluatorModule
    if name == "ScoringDataModule":
        from robusteval.training.data import ScoringDataModule

        return ScoringDataModule
    raise AttributeError(name)
