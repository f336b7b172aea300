"""Learned cross-encoder evaluators: encoder + pooling + linear + sigmoid.

* ``poe``: the PoE scorer of Zhang et al. 2023 ("PoE: a Panel of Experts for Generalized
  Automatic Dialogue Assessment", TASLP), as AdvEval (Chen et al. 2024, §4.1) runs it:
  context truncated from the front, inputs padded to 256 tokens, mean pooling over *all*
  256 positions, score = (1 - p) x 100 where p is the sigmoid output. Users load the hub
  checkpoint ``hlt-lab/poe-roberta-large``.
* ``cross-encoder``: the same family for checkpoints robusteval trains (``robusteval train``):
  mean pooling over real tokens, score = p x 100.

Checkpoint layouts understood by :func:`load_scorer`:

1. a robusteval folder: ``scorer.json`` (base encoder, pooling, conventions), ``head.safetensors``
   and either ``encoder/`` (a full HF encoder) or ``adapter/`` (a peft LoRA adapter over the base);
2. any HF folder / hub id holding one state dict with the encoder and a single
   ``[1, hidden]`` linear head (the head's key prefix is configurable with ``head_prefix``).
   This is how the PoE hub checkpoint is expected to look; its exact key names could not be
   checked offline, so ``load_scorer`` reports the keys it found when it cannot map them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from robusteval.errors import MissingResourceError
from robusteval.metrics.base import Metric
from robusteval.metrics.registry import register_metric
from robusteval.paths import minilm_dir
from robusteval.types import Sample


@dataclass
class ScorerConfig:
    """How a cross-encoder turns (context, response) into a score."""

    base_model: str = ""
    pooling: str = "mean"  # "mean" (real tokens), "mean_all" (every position), "cls"
    max_length: int = 256
    pad_to_max: bool = False
    truncate_context_from: str = "left"  # "left": keep the most recent turns; "right": keep a document's
    # start; "middle": keep its head and tail
    invert: bool = False  # score = (1 - p) instead of p
    turn_separator: str = "\n"


TRUNCATIONS = ("left", "right", "middle")
POE_CONVENTIONS = dict(pooling="mean_all", max_length=256, pad_to_max=True,
                       truncate_context_from="left", invert=True)


def build_scorer_module(encoder: Any, pooling: str) -> Any:
    """An ``nn.Module``: encoder -> pooling -> Linear(hidden, 1) -> logit."""
    import torch
    from torch import nn

    class CrossEncoderScorer(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.encoder = encoder
            self.pooling = pooling
            self.head = nn.Linear(encoder.config.hidden_size, 1)

        def forward(self, input_ids: torch.Tensor | None, attention_mask: torch.Tensor,
                    inputs_embeds: torch.Tensor | None = None) -> torch.Tensor:
            hidden = self.encoder(input_ids=input_ids, attention_mask=attention_mask,
                                  inputs_embeds=inputs_embeds).last_hidden_state
            if self.pooling == "cls":
                pooled = hidden[:, 0]
            elif self.pooling == "mean_all":
                pooled = hidden.mean(dim=1)
            else:
                m = attention_mask.unsqueeze(-1).to(hidden.dtype)
                pooled = (hidden * m).sum(1) / m.sum(1).clamp(min=1.0)
            return self.head(pooled).squeeze(-1)

    return CrossEncoderScorer()


def cut(tokens: list[int], room: int, side: str) -> list[int]:
    """``tokens`` cut to ``room``: from the left (keep the end), the right (keep the start) or the
    middle (keep the first and last halves)."""
    if len(tokens) <= room:
        return tokens
    if room <= 0:
        return []
    if side == "left":
        return tokens[-room:]
    if side == "right":
        return tokens[:room]
    if side == "middle":
        head = (room + 1) // 2
        return tokens[:head] + tokens[len(tokens) - (room - head):] if room - head else tokens[:head]
    raise ValueError(f"truncate_context_from must be one of {TRUNCATIONS}, got {side!r}")


def encode_pairs(tokenizer: Any, contexts: Sequence[str], responses: Sequence[str],
                 cfg: ScorerConfig) -> dict[str, Any]:
    """Tokenize (context, response) pairs; an over-long context is cut at ``truncate_context_from``
    (:func:`cut`)."""
    import torch

    cls_id = tokenizer.cls_token_id if tokenizer.cls_token_id is not None else tokenizer.bos_token_id
    sep_id = tokenizer.sep_token_id if tokenizer.sep_token_id is not None else tokenizer.eos_token_id
    rows = []
    for ctx, resp in zip(contexts, responses, strict=True):
        c = tokenizer(ctx, add_special_tokens=False)["input_ids"]
        r = tokenizer(resp, add_special_tokens=False)["input_ids"]
        # an over-long response keeps its first half-window so some context still fits
        r = r[: max(1, cfg.max_length // 2)] if len(r) > cfg.max_length - 4 else r
        room = cfg.max_length - len(r) - 3
        c = cut(c, max(room, 0), cfg.truncate_context_from)
        rows.append([cls_id, *c, sep_id, *r, sep_id])
    width = cfg.max_length if cfg.pad_to_max else max(len(x) for x in rows)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    ids = torch.full((len(rows), width), pad, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, row in enumerate(rows):
        ids[i, :len(row)] = torch.tensor(row)
        mask[i, :len(row)] = 1
    return {"input_ids": ids, "attention_mask": mask}


def quality(module: Any, tokenizer: Any, cfg: ScorerConfig, samples: Sequence[Sample], device: Any) -> Any:
    """The scorer's quality in [0, 1] (higher is better) for ``samples``, as a tensor with
    gradients: sigmoid of the head, inverted under PoE's convention. The metric and the
    training module both call this, so training optimizes exactly what the metric reports."""
    import torch

    enc = encode_pairs(tokenizer, [cfg.turn_separator.join(s.context) for s in samples],
                       [s.response for s in samples], cfg)
    p = torch.sigmoid(module(enc["input_ids"].to(device), enc["attention_mask"].to(device)).float())
    return 1.0 - p if cfg.invert else p


def _read_state_dict(folder: Path) -> dict[str, Any]:
    from safetensors.torch import load_file

    for name in ("model.safetensors", "pytorch_model.safetensors"):
        if (folder / name).is_file():
            return load_file(str(folder / name))
    if (folder / "pytorch_model.bin").is_file():
        import torch

        return torch.load(folder / "pytorch_model.bin", map_location="cpu", weights_only=True)
    raise MissingResourceError(f"{folder}: no model.safetensors or pytorch_model.bin")


def load_scorer(checkpoint: str | None, cfg: ScorerConfig | None = None,
                head_prefix: str | None = None) -> tuple[Any, Any, ScorerConfig]:
    """(module, tokenizer, config) from a robusteval folder, an HF folder or a hub id."""
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    if checkpoint is None:
        base = str(minilm_dir())
        cfg = cfg or ScorerConfig(base_model=base)
        cfg.base_model = cfg.base_model or base
        tok = AutoTokenizer.from_pretrained(cfg.base_model)
        return build_scorer_module(AutoModel.from_pretrained(cfg.base_model), cfg.pooling), tok, cfg
    folder = Path(checkpoint)
    if (folder / "scorer.json").is_file():
        from safetensors.torch import load_file

        saved = ScorerConfig(**json.loads((folder / "scorer.json").read_text()))
        if (folder / "encoder").is_dir():
            encoder = AutoModel.from_pretrained(folder / "encoder")
            tok = AutoTokenizer.from_pretrained(folder / "encoder")
        elif (folder / "adapter").is_dir():
            from peft import PeftModel

            encoder = PeftModel.from_pretrained(AutoModel.from_pretrained(saved.base_model),
                                                folder / "adapter").merge_and_unload()
            tok = AutoTokenizer.from_pretrained(saved.base_model)
        else:
            raise MissingResourceError(f"{folder}: scorer.json but neither encoder/ nor adapter/")
        module = build_scorer_module(encoder, saved.pooling)
        module.head.load_state_dict({k.removeprefix("head."): v for k, v in
                                     load_file(str(folder / "head.safetensors")).items()})
        return module.eval(), tok, saved
    # an HF folder / hub id with one state dict: encoder + a [1, hidden] head
    cfg = cfg or ScorerConfig()
    cfg.base_model = checkpoint
    if not folder.is_dir():
        from huggingface_hub import snapshot_download

        try:
            folder = Path(snapshot_download(checkpoint))
        except Exception as exc:  # offline, unknown id, auth...
            raise MissingResourceError(
                f"cannot load checkpoint {checkpoint!r}: not a local folder and the hub download "
                f"failed ({type(exc).__name__}); download it where a hub is reachable and pass "
                "the folder") from None
    config = AutoConfig.from_pretrained(folder)
    encoder = AutoModel.from_config(config)
    module = build_scorer_module(encoder, cfg.pooling)
    state = _read_state_dict(folder)
    hidden = config.hidden_size
    heads = [k for k, v in state.items() if k.endswith("weight") and tuple(v.shape) == (1, hidden)
             and (head_prefix is None or k.startswith(head_prefix))]
    if len(heads) != 1:
        raise MissingResourceError(
            f"{checkpoint}: expected one [1, {hidden}] head weight, found {heads or 'none'}; "
            f"pass head_prefix=... (keys: {', '.join(list(state)[:8])}...)")
    hp = heads[0][: -len("weight")]
    module.head.load_state_dict({"weight": state[hp + "weight"], "bias": state[hp + "bias"]})
    enc_state = {}
    prefixes = [p + "." for p in (encoder.base_model_prefix, "encoder", "model", "bert", "roberta")]
    for k, v in state.items():
        if k.startswith(hp):
            continue
        for p in prefixes:
            if k.startswith(p):
                k = k[len(p):]
                break
        enc_state[k] = v
    missing, _ = encoder.load_state_dict(enc_state, strict=False)
    real_missing = [m for m in missing if "position_ids" not in m]
    if real_missing:
        raise MissingResourceError(f"{checkpoint}: encoder weights missing: {real_missing[:5]}")
    return module.eval(), AutoTokenizer.from_pretrained(folder), cfg


class _CrossEncoderMetric(Metric):
    defaults: ClassVar[dict[str, Any]] = {}

    default_checkpoint: ClassVar[str | None] = None

    def __init__(self, checkpoint: str | None = None, batch_size: int = 32, device: str = "cpu",
                 head_prefix: str | None = None, **kwargs: Any) -> None:
        conv = {k: kwargs.pop(k) for k in list(kwargs) if k in ScorerConfig.__dataclass_fields__}
        super().__init__(**kwargs)
        checkpoint = checkpoint or self.default_checkpoint
        if checkpoint is None:
            raise ValueError(f"{self.name} needs checkpoint=... (a folder written by "
                             "'robusteval train', or an HF folder / hub id)")
        cfg = ScorerConfig(**{**self.defaults, **conv})
        self.module, self.tokenizer, self.config = load_scorer(checkpoint, cfg, head_prefix)
        for k, v in conv.items():  # explicit options win over a saved config
            setattr(self.config, k, v)
        self.module.to(device).eval()
        self.checkpoint = checkpoint
        self.batch_size = batch_size
        self.device = device
        self.model_calls = 0

    def _score(self, samples: list[Sample]) -> np.ndarray:
        import torch

        order = sorted(range(len(samples)), key=lambda i: len(samples[i].response) +
                       len(samples[i].source_text()))
        out = np.zeros(len(samples))
        for start in range(0, len(order), self.batch_size):
            idx = order[start:start + self.batch_size]
            with torch.no_grad():
                q = quality(self.module, self.tokenizer, self.config, [samples[i] for i in idx], self.device)
            self.model_calls += 1
            out[idx] = q.cpu().numpy()
        return 100.0 * out

    def signature(self) -> str:
        return f"checkpoint={self.checkpoint}|{json.dumps(asdict(self.config), sort_keys=True)}"


@register_metric("poe", family="learned", source="Zhang et al. 2023 (PoE); AdvEval conventions, Chen et al. 2024")
class PoE(_CrossEncoderMetric):
    """PoE-style scorer with AdvEval's inference conventions (``checkpoint=hlt-lab/poe-roberta-large``)."""

    name: ClassVar[str] = "poe"
    default_checkpoint: ClassVar[str | None] = "hlt-lab/poe-roberta-large"
    defaults: ClassVar[dict[str, Any]] = dict(POE_CONVENTIONS)


@register_metric("cross-encoder", family="learned", source="robusteval (PoE family, trained here)")
class CrossEncoder(_CrossEncoderMetric):
    """Cross-encoder trained by robusteval (``checkpoint=`` a ``robusteval train`` output)."""

    name: ClassVar[str] = "cross-encoder"
