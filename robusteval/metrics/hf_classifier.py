"""``hf-classifier``: any ``AutoModelForSequenceClassification`` checkpoint, run exactly as its own
forward runs it.

The metric tokenizes with the checkpoint's tokenizer, calls the model's forward and reads
``.logits``: the model's own pooling (BERT's pooler, RoBERTa's dense head, a reward model's
last non-padding token), head and label set, nothing re-implemented. It covers
sequence classifiers (acceptability, NLI, quality or toxicity classifiers) and reward models
(one logit).

Options:

* ``checkpoint`` — an HF folder or hub id (``revision`` pins a hub commit);
* ``inputs`` — what is fed, one text or a pair ``"first+second"`` of the sample's fields
  (:data:`FIELDS`): ``"response"`` (the default), ``"source+response"`` (context or document,
  then the response: dialogue and summary scorers, reward models fed prompt + answer),
  ``"last_turn+response"``, ``"response+reference"`` or ``"reference+response"`` (NLI-style
  premise/hypothesis). With references, each one is scored and the best kept (as
  :class:`~robusteval.metrics.base.PairMetric` does);
* ``max_length`` (default: the tokenizer's limit, at most the model's positions) and
  ``truncation`` (``"longest_first"``, ``"only_first"`` keeps the second text whole,
  ``"only_second"``): the tokenizer's own truncation;
* ``batch_size``; ``device`` (``"auto"``: CUDA when available, else MPS, else the CPU).

**Score, 0-100, higher is better.**

* One logit (regression or reward model): ``100 * sigmoid(logit)`` by default, or with
  ``scale=(lo, hi)`` the linear map ``100 * (logit - lo) / (hi - lo)`` (values outside are
  clipped and counted by :class:`~robusteval.metrics.base.Metric`). A reward model's raw
  reward is unbounded: ``scale`` set to the rewards seen on rated data keeps its spread.
* Several labels: the probability of ``positive_label`` (a name from ``config.id2label``,
  case-insensitive, or an index) x 100: softmax over the labels, or the label's own sigmoid
  when ``config.problem_type`` is ``multi_label_classification``. Without ``positive_label``
  the metric refuses and lists the labels (a guessed direction would be silently wrong).

The model runs in evaluation mode under ``torch.no_grad()`` (no dropout: deterministic). A
checkpoint whose head was not in the saved weights (a plain encoder) is refused instead of
scoring with a random head; a robusteval cross-encoder export is pointed to ``cross-encoder``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from robusteval.errors import InputError, RobustevalError
from robusteval.metrics.base import Metric, resolve_device
from robusteval.metrics.identity import model_identity
from robusteval.metrics.registry import register_metric
from robusteval.text import is_blank
from robusteval.types import Sample

FIELDS = ("response", "source", "last_turn", "reference")
TRUNCATIONS = ("longest_first", "only_first", "only_second")


def parse_inputs(inputs: str) -> tuple[str, ...]:
    """``"source+response"`` -> ("source", "response"); checked against :data:`FIELDS`."""
    parts = tuple(p.strip() for p in inputs.split("+"))
    if not 1 <= len(parts) <= 2 or any(p not in FIELDS for p in parts) or "response" not in parts \
            or len(set(parts)) != len(parts):
        raise ValueError(f"inputs must be 'response' or a pair 'A+B' of {', '.join(FIELDS)} that includes "
                         f"the response (e.g. 'source+response', 'response+reference'); got {inputs!r}")
    return parts


def _field_texts(sample: Sample, field: str) -> tuple[str, ...]:
    if field == "response":
        return (sample.response,)
    if field == "source":
        return (sample.source_text(),) if not is_blank(sample.source_text()) else ()
    if field == "last_turn":
        return (sample.context[-1],) if sample.context and not is_blank(sample.context[-1]) else ()
    return tuple(r for r in sample.all_references() if not is_blank(r))


@register_metric("hf-classifier", family="learned",
                 source="any transformers AutoModelForSequenceClassification checkpoint (its own forward)")
class HFClassifier(Metric):
    """A sequence-classification or reward model scored through its own forward (module docstring)."""

    name: ClassVar[str] = "hf-classifier"

    def __init__(self, checkpoint: str | None = None, inputs: str = "response",
                 positive_label: str | int | None = None, scale: Sequence[float] | None = None,
                 max_length: int | None = None, truncation: str = "longest_first", batch_size: int = 16,
                 device: str = "auto", revision: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if not checkpoint:
            raise ValueError("hf-classifier needs checkpoint=... (an HF sequence-classification or reward "
                             "model folder or hub id)")
        if truncation not in TRUNCATIONS:
            raise ValueError(f"truncation must be one of {TRUNCATIONS}, got {truncation!r}")
        self.fields = parse_inputs(inputs)
        self.requires_reference = "reference" in self.fields  # type: ignore[misc]
        folder = Path(checkpoint)
        if (folder / "scorer.json").is_file():
            raise RobustevalError(f"{checkpoint} is a robusteval cross-encoder export (scorer.json): "
                                  f"load it with metrics.load('cross-encoder', checkpoint={checkpoint!r})")
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        self.device = resolve_device(device)
        model, info = AutoModelForSequenceClassification.from_pretrained(
            checkpoint, revision=revision, output_loading_info=True)
        fresh = [k for k in info.get("missing_keys", []) if "position_ids" not in k]
        if fresh:
            raise RobustevalError(
                f"{checkpoint}: these weights are not in the checkpoint and would be random: "
                f"{', '.join(sorted(fresh)[:4])}{' ...' if len(fresh) > 4 else ''}. It is not a trained "
                f"{type(model).__name__} (a plain encoder?); a robusteval export loads as 'cross-encoder'")
        self.model = model.to(self.device).eval()
        self.tokenizer = AutoTokenizer.from_pretrained(checkpoint, revision=revision)
        cfg = model.config
        self.num_labels = int(cfg.num_labels)
        self.multi_label = getattr(cfg, "problem_type", None) == "multi_label_classification"
        self.labels = {int(i): str(n) for i, n in (cfg.id2label or {}).items()}
        self.positive_index = self._positive(positive_label, checkpoint)
        if scale is not None:
            lo, hi = (float(v) for v in scale)
            if self.num_labels != 1 or not hi > lo:
                raise ValueError("scale=(lo, hi) with lo < hi applies to a one-logit (regression / reward) model"
                                 f"; {checkpoint} has {self.num_labels} labels")
            self.scale: tuple[float, float] | None = (lo, hi)
        else:
            self.scale = None
        # padding: the tokenizer's pad token, else the model's; with neither, one text per call
        # (no padding at all) instead of guessing what the model would pool
        if self.tokenizer.pad_token_id is None and getattr(cfg, "pad_token_id", None) is not None:
            self.tokenizer.pad_token_id = cfg.pad_token_id
        self.batch_size = batch_size if self.tokenizer.pad_token_id is not None else 1
        limit = self.tokenizer.model_max_length if self.tokenizer.model_max_length < 10**6 else None
        positions = getattr(cfg, "max_position_embeddings", None) or getattr(cfg, "n_positions", None)
        if positions and cfg.model_type in ("roberta", "xlm-roberta", "camembert"):
            positions -= 2  # their position ids start after the padding index
        default = min(x for x in (limit, positions, 512) if x)
        self.max_length = int(max_length or default)
        self.truncation = truncation
        self.checkpoint, self.revision = checkpoint, revision
        # a hub snapshot's commit; a local folder is named by its weights (model_identity)
        self.commit = "" if folder.is_dir() else getattr(cfg, "_commit_hash", None) or ""
        self.model_calls = 0

    def _positive(self, positive_label: str | int | None, checkpoint: str) -> int | None:
        if self.num_labels == 1:
            if positive_label is not None:
                raise ValueError(f"{checkpoint} has one output (regression / reward): positive_label does not "
                                 "apply; use scale=(lo, hi) to map its value")
            return None
        shown = ", ".join(f"{i}: {n}" for i, n in sorted(self.labels.items()))
        if positive_label is None:
            raise ValueError(f"{checkpoint} has {self.num_labels} labels ({shown}); pass positive_label=<name> "
                             "(the label whose probability is the score, higher = better)")
        hits = [i for i, n in self.labels.items() if n.lower() == str(positive_label).lower()]
        if len(hits) == 1:
            return hits[0]
        if len(hits) > 1:
            raise ValueError(f"positive_label {positive_label!r} names labels {hits} of {checkpoint} "
                             f"({shown}); pass the index")
        index = positive_label if isinstance(positive_label, int) else \
            int(positive_label) if str(positive_label).isdigit() else -1
        if 0 <= index < self.num_labels:
            return index
        raise ValueError(f"positive_label {positive_label!r} is not a label of {checkpoint} ({shown})")

    def check_sample(self, sample: Sample) -> None:
        for f in self.fields:
            if not _field_texts(sample, f):
                raise InputError(sample.id, f, f"hf-classifier (inputs={'+'.join(self.fields)}) needs a "
                                 f"non-empty {f}")

    def logits(self, firsts: Sequence[str], seconds: Sequence[str] | None = None) -> np.ndarray:
        """The model's own logits ([n, num_labels]) for texts or text pairs, in input order."""
        import torch

        out = np.zeros((len(firsts), self.num_labels))
        order = sorted(range(len(firsts)), key=lambda i: len(firsts[i]) + len(seconds[i] if seconds else ""))
        for start in range(0, len(order), self.batch_size):
            idx = order[start:start + self.batch_size]
            a = [firsts[i] for i in idx]
            b = [seconds[i] for i in idx] if seconds is not None else None
            enc = self.tokenizer(a, b, padding=True, truncation=self.truncation if b is not None else True,
                                 max_length=self.max_length, return_tensors="pt")
            with torch.no_grad():
                out[idx] = self.model(**enc.to(self.device)).logits.float().cpu().numpy()
            self.model_calls += 1
        return out

    def transform(self, logits: np.ndarray) -> np.ndarray:
        """Logits [n, num_labels] -> scores 0-100 (the mapping of the module docstring)."""
        logits = np.asarray(logits, dtype=np.float64)
        if self.num_labels == 1:
            x = logits[:, 0]
            if self.scale is not None:
                lo, hi = self.scale
                return 100.0 * (x - lo) / (hi - lo)
            return 100.0 / (1.0 + np.exp(-x))
        assert self.positive_index is not None
        if self.multi_label:
            return 100.0 / (1.0 + np.exp(-logits[:, self.positive_index]))
        z = logits - logits.max(axis=1, keepdims=True)
        p = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
        return 100.0 * p[:, self.positive_index]

    def _score(self, samples: list[Sample]) -> np.ndarray:
        owner: list[int] = []
        firsts: list[str] = []
        seconds: list[str] = []
        for i, s in enumerate(samples):
            texts = [_field_texts(s, f) for f in self.fields]
            for a in texts[0]:
                for b in texts[1] if len(texts) == 2 else (None,):
                    owner.append(i)
                    firsts.append(a)
                    if b is not None:
                        seconds.append(b)
        scores = self.transform(self.logits(firsts, seconds if len(self.fields) == 2 else None))
        best = np.full(len(samples), -math.inf)
        np.maximum.at(best, np.asarray(owner), scores)
        return best

    def signature(self) -> str:
        mapping = (f"scale={self.scale}" if self.scale else "sigmoid") if self.num_labels == 1 else \
            f"p({self.labels.get(self.positive_index or 0, self.positive_index)})" + \
            ("[sigmoid]" if self.multi_label else "[softmax]")
        return "|".join([f"checkpoint={model_identity(self.checkpoint)}",
                         f"revision={self.revision or self.commit or 'local'}",
                         f"inputs={'+'.join(self.fields)}", mapping, f"max_length={self.max_length}",
                         f"truncation={self.truncation}", f"arch={json.dumps(type(self.model).__name__)}"])
