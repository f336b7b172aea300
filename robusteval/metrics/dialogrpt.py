"""DialogRPT (Gao et al., 2020, "Dialogue Response Ranking Training with Large-Scale Human
Feedback Data", EMNLP): GPT-2 with a linear head read at the last real token.

Input: context turns and the response joined by ``<|endoftext|>``; the score of one head is
sigmoid(logit at the last non-padding position). Heads: ``human_vs_rand``,
``human_vs_machine`` (priors), ``updown``, ``depth``, ``width`` (conditionals), loaded from
``microsoft/DialogRPT-<head>`` or ``checkpoints={head: folder}``. The upstream ensemble
(``restore/ensemble.yml`` of the reference code) is

    final = mean(human_vs_rand, human_vs_machine) * (updown + 0.48 depth - 0.5 width) / 0.98

which reproduces the ``final`` column of upstream's ``doc/toy.tsv.ensemble.jsonl``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from robusteval.metrics.base import Metric, resolve_device
from robusteval.metrics.identity import model_identity
from robusteval.metrics.registry import register_metric
from robusteval.types import Sample

HEADS = ("human_vs_rand", "human_vs_machine", "updown", "depth", "width")
PRIOR_WEIGHTS = {"human_vs_rand": 1.0, "human_vs_machine": 1.0}
COND_WEIGHTS = {"updown": 1.0, "depth": 0.48, "width": -0.5}


def ensemble(scores: Mapping[str, np.ndarray]) -> np.ndarray:
    """Upstream's ensemble of the five head probabilities."""
    prior = sum(w * scores[k] for k, w in PRIOR_WEIGHTS.items()) / sum(PRIOR_WEIGHTS.values())
    cond = sum(w * scores[k] for k, w in COND_WEIGHTS.items()) / sum(COND_WEIGHTS.values())
    return np.asarray(prior * cond, dtype=np.float64)


@register_metric("dialogrpt", family="learned", source="Gao et al. 2020 (EMNLP), DialogRPT")
class DialogRPT(Metric):
    """The DialogRPT ensemble (``head="ensemble"``, the default: the composite score Vasselli &
    Watanabe use as the overall score, §3.2.1) or one head (``head="updown"`` ...), x100.

    Options: ``checkpoints`` (head -> id/folder; default ``microsoft/DialogRPT-<head>``),
    ``max_length`` (tokens kept from the end of context+response, 1024), ``batch_size``.
    """

    name: ClassVar[str] = "dialogrpt"
    tasks: ClassVar[tuple[str, ...]] = ("dialogue",)

    def __init__(self, head: str = "ensemble", checkpoints: Mapping[str, str] | None = None,
                 max_length: int = 1024, batch_size: int = 16, device: str = "cpu",
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        device = resolve_device(device)  # "auto": cuda when there is a GPU, also when built directly
        if head not in (*HEADS, "ensemble"):
            raise ValueError(f"head must be one of {', '.join(HEADS)}, ensemble; got {head!r}")
        from transformers import AutoTokenizer, GPT2ForSequenceClassification

        self.head = head
        need = HEADS if head == "ensemble" else (head,)
        self.checkpoints = {h: (checkpoints or {}).get(h, f"microsoft/DialogRPT-{h.replace('_', '-')}")
                            for h in need}
        self.models = {h: GPT2ForSequenceClassification.from_pretrained(p).to(device).eval()
                       for h, p in self.checkpoints.items()}
        self.tokenizer = AutoTokenizer.from_pretrained(self.checkpoints[need[0]])
        self.eos = self.tokenizer.eos_token_id
        # never more tokens than the model has positions (a longer input would index past
        # its position table): DialogRPT has 1024, a smaller GPT-2 fewer
        positions = min(int(getattr(m.config, "n_positions", max_length)) for m in self.models.values())
        self.max_length = min(max_length, positions)
        self.batch_size = batch_size
        self.device = device
        self.model_calls = 0

    def encode(self, sample: Sample) -> list[int]:
        ids: list[int] = []
        for turn in sample.context:
            ids += [*self.tokenizer.encode(turn.strip()), self.eos]
        ids += self.tokenizer.encode(sample.response.strip())
        return ids[-self.max_length:]

    def head_scores(self, samples: Sequence[Sample]) -> dict[str, np.ndarray]:
        """sigmoid(logit) at the last real token, per head."""
        import torch

        encoded = [self.encode(s) for s in samples]
        out = {h: np.zeros(len(samples)) for h in self.models}
        order = sorted(range(len(samples)), key=lambda i: len(encoded[i]))
        for start in range(0, len(order), self.batch_size):
            idx = order[start:start + self.batch_size]
            width = max(len(encoded[i]) for i in idx)
            ids = torch.full((len(idx), width), self.eos, dtype=torch.long)
            mask = torch.zeros((len(idx), width), dtype=torch.long)
            for r, i in enumerate(idx):
                ids[r, :len(encoded[i])] = torch.tensor(encoded[i])
                mask[r, :len(encoded[i])] = 1
            last = mask.sum(1) - 1
            for h, model in self.models.items():
                with torch.no_grad():
                    hidden = model.transformer(input_ids=ids.to(self.device),
                                               attention_mask=mask.to(self.device)).last_hidden_state
                    logits = model.score(hidden[torch.arange(len(idx)), last.to(self.device)]).squeeze(-1)
                self.model_calls += 1
                out[h][idx] = torch.sigmoid(logits.float()).cpu().numpy()
        return out

    def _score(self, samples: list[Sample]) -> np.ndarray:
        scores = self.head_scores(samples)
        return 100.0 * (ensemble(scores) if self.head == "ensemble" else scores[self.head])

    def signature(self) -> str:
        models = sorted((h, model_identity(c)) for h, c in self.checkpoints.items())  # local folders by weights
        return f"head={self.head}|checkpoints={models}|max_length={self.max_length}"
