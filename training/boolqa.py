"""A UniEval-style seq2seq Boolean-QA evaluator fine-tuned with LoRA.

UniEval (Zhong et al. 2022) scores a text as P(Yes) / (P(Yes) + P(No)) at the first decoder
step for a question such as "question: Is this response natural? </s> response: ... </s>
dialogue history: ...". This module trains the same quantity towards the target in [0, 1]
(binary cross-entropy on the normalized P(Yes)), with LoRA on the attention projections, for
users who have a UniEval checkpoint (``MingZhong/unieval-dialog`` and the like); it is tested
on a tiny T5 here. The export (``adapter/`` + ``boolqa.json``) loads with
``metrics.load("unieval", model=<base>, adapter=<export>/adapter)``.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from robusteval.training.base import EvaluatorModule

from robusteval.errors import RobustevalError
from robusteval.metrics.unieval import PROMPTS, fields_for, yes_probability
from robusteval.types import Sample


class BoolQAModule(EvaluatorModule):
    """LoRA Boolean-QA evaluator (UniEval layout).

    Args:
        checkpoint: a seq2seq model folder or hub id (a UniEval checkpoint); required.
        task: UniEval task whose prompt is used ("dialogue", "summarization", "fact", "data2text").
        dimension: the prompt's dimension (e.g. "naturalness", "coherence").
        max_length: input tokens.
        lora_r: LoRA rank.
        lora_alpha: LoRA scaling.
        lora_dropout: dropout on the LoRA path.
        target_modules: modules LoRA adapts (default T5's attention "q", "v").
        loss: "mse" (here: binary cross-entropy on P(Yes)), "margin" or "mse+margin".
        margin: required gap between an original and its R- adversarial example.
        margin_weight: weight of the margin loss.
        lr: AdamW learning rate.
        weight_decay: AdamW weight decay.
        seed: per-step reseeding of dropout (exact resume).
        export_dir: where the adapter is written (default ``<log dir>/export``).
        adapter: an earlier export's ``adapter/`` folder to train further (hardening rounds).
        consistency_weight: weight of the R+ consistency loss (0: off).
        embed_adv_weight: weight of the embedding-space adversary (0: off).
        embed_eps: radius of the embedding perturbation (L2 per token).
        embed_steps: ascent steps of the embedding adversary.
        adv_point_loss: give adversarial examples the point (mse) loss against their target
            too; False leaves them the margin (R-) and consistency (R+) losses only.
    """

    def __init__(self, checkpoint: str, task: str = "dialogue", dimension: str = "naturalness", max_length: int = 512,
                 lora_r: int = 8, lora_alpha: int = 16, lora_dropout: float = 0.1,
                 target_modules: list[str] | None = None, loss: str = "mse+margin", margin: float = 0.1,
                 margin_weight: float = 1.0, lr: float = 3e-4, weight_decay: float = 0.01, seed: int = 0,
                 export_dir: str | None = None, adapter: str | None = None, consistency_weight: float = 1.0,
                 embed_adv_weight: float = 0.0, embed_eps: float = 0.01, embed_steps: int = 1,
                 adv_point_loss: bool = True) -> None:
        super().__init__(loss=loss, margin=margin, margin_weight=margin_weight, lr=lr, weight_decay=weight_decay,
                         seed=seed, export_dir=export_dir, consistency_weight=consistency_weight,
                         embed_adv_weight=embed_adv_weight, embed_eps=embed_eps, embed_steps=embed_steps,
                         adv_point_loss=adv_point_loss)
        self.save_hyperparameters()
        from peft import LoraConfig, get_peft_model
        from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

        if task not in PROMPTS or dimension not in PROMPTS[task]:
            raise RobustevalError(f"UniEval has no prompt {task}/{dimension} (tasks: {', '.join(PROMPTS)})")
        self.checkpoint, self.task, self.dimension, self.max_length = checkpoint, task, dimension, max_length
        self.template = PROMPTS[task][dimension]["template"]
        self.tokenizer = AutoTokenizer.from_pretrained(checkpoint)
        base = AutoModelForSeq2SeqLM.from_pretrained(checkpoint)
        self.yes = self.tokenizer("Yes")["input_ids"][0]
        self.no = self.tokenizer("No")["input_ids"][0]
        if self.yes == self.no:
            raise RobustevalError(f"{checkpoint}: 'Yes' and 'No' start with the same token")
        if adapter:  # continue an earlier export's adapter (a hardening round)
            from peft import PeftModel

            self.model = PeftModel.from_pretrained(base, adapter, is_trainable=True)
        else:
            lcfg = LoraConfig(r=lora_r, lora_alpha=lora_alpha, lora_dropout=lora_dropout,
                              target_modules=target_modules or ["q", "v"], bias="none")
            self.model = get_peft_model(base, lcfg)
        self.model.train()

    def inputs(self, samples: list[Sample]) -> list[str]:
        return [self.template.format(output=s.response, **fields_for(s, self.task)) for s in samples]

    def predict(self, samples: list[Sample]) -> torch.Tensor:
        enc = self.tokenizer(self.inputs(samples), max_length=self.max_length, truncation=True, padding=True,
                             return_tensors="pt").to(self.device)
        return yes_probability(self.model, enc["input_ids"], enc["attention_mask"], self.yes, self.no)

    def embed(self, samples: list[Sample]) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        enc = self.tokenizer(self.inputs(samples), max_length=self.max_length, truncation=True, padding=True,
                             return_tensors="pt").to(self.device)
        return self.model.get_input_embeddings()(enc["input_ids"]), {"attention_mask": enc["attention_mask"]}

    def predict_embeds(self, embeds: torch.Tensor, extra: dict[str, torch.Tensor]) -> torch.Tensor:
        return yes_probability(self.model, None, extra["attention_mask"], self.yes, self.no, inputs_embeds=embeds)

    def point_loss(self, pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """A probability against a soft target: binary cross-entropy."""
        return torch.nn.functional.binary_cross_entropy(pred.clamp(1e-6, 1 - 1e-6), target)

    def export(self, folder: str | Path) -> Path:
        out = Path(folder)
        out.mkdir(parents=True, exist_ok=True)
        self.model.save_pretrained(out / "adapter")
        (out / "boolqa.json").write_text(json.dumps({"base_model": self.checkpoint, "task": self.task,
                                                      "dimension": self.dimension}, indent=2), encoding="utf-8")
        return out
