"""[perplexity] Fluency under a causal language model (SmolLM2-135M by default).

Word salad, jumbled or reversed words, broken-sentence strings and punctuation triggers are
improbable text: their perplexity under any LM is one to two orders of magnitude above that of
fluent text (SmolLM2: ~200-400 for a normal sentence, ~20,000 scrambled). Used as a defense
against the ungrammatical attacks of Vasselli & Watanabe (Table 2) and Mu & Lim's
broken-sentence attack (§6.2), in the spirit of perplexity filtering of adversarial text.

Suspicion is logistic in log-perplexity: ``1 / (1 + exp(-(ln ppl - ln center) / width))``
(center 2,000, width 1: ppl 300 -> 0.13, ppl 20,000 -> 0.91). ``model`` is any local HF causal
LM folder or hub id (``None``: the converted SmolLM2). Texts are cut to ``max_tokens``.

**A dialogue reply is scored given its context** (``context="auto"``, the default; version 2):
the perplexity of the reply's tokens after the conversation's last ``context_tokens`` tokens
(the turns joined by newlines). Out of context, a short fluent reply ("okay .", "thank you .")
is as improbable as word salad: on DailyDialog-Zhao the highest-perplexity well-rated English
reply reached 11.4 nats, so a threshold calibrated on them let jumbled and reversed turns pass
(1.2 % detected). Given the context, the same replies stay below 6.6 nats, and jumbled and
reversed words stand out (AUC 0.99 and 1.00 against 0.85 and 0.83 alone; BENCHMARKS §9e,
"Perplexity given the dialogue context"). Other tasks (a summary and its document) are scored
alone; ``context="none"`` scores every text alone, as version 1 did, but no shipped default
threshold is calibrated for it: calibrate one (``robusteval guard calibrate``) or it applies the
class default 0.5, which flags about a quarter of well-rated English replies.

Log-perplexity is rounded to ``STEP`` (0.001 nats: 0.1 % of the perplexity) before the logistic.
An LM's float results depend on the batch a text is scored in (padding and batch size change
the kernels' summation order, by about 1e-7), and a calibrated threshold sits one float above
the largest clean suspicion: without the rounding, the same clean reply scored in another batch
could land a hair above its own calibrated value and be flagged (measured: the Arabic reply
"فهمت." in both halves of the xDial clean set, 5 of 152 held-out replies flagged). With it, two
scorings of one text differ only when they straddle a rounding half-point (a chance of about
noise / STEP, 1e-4). A non-finite value is passed on unrounded, for the detector's own error.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np
from robusteval.detectors.base import Detector, register_detector

from robusteval.errors import RobustevalError
from robusteval.types import Sample

STEP = 0.001  # nats: log-perplexity is rounded to this (see the module docstring)
CONTEXT_MODES = ("auto", "none")


@register_detector
class Perplexity(Detector):
    """Perplexity of the response under a causal LM (fluency)."""

    name: ClassVar[str] = "perplexity"
    family: ClassVar[str] = "fluency"
    source: ClassVar[str] = ("LM perplexity filter against ungrammatical attacks (Vasselli & Watanabe, Table 2; "
                             "Mu & Lim 2022 §6.2 broken sentences)")
    default_threshold: ClassVar[float] = 0.5
    version: ClassVar[int] = 2  # a dialogue reply is scored given its context
    reads: ClassVar[tuple[str, ...]] = ("task", "response", "context")

    def __init__(self, model: str | None = None, center: float = 2000.0, width: float = 1.0,
                 max_tokens: int = 512, context: str = "auto", context_tokens: int = 256,
                 threshold: float | None = None, backend: Any = None) -> None:
        super().__init__(threshold)
        if context not in CONTEXT_MODES:
            raise ValueError(f"perplexity: context must be one of {CONTEXT_MODES}, got {context!r}")
        if context_tokens < 1:
            raise ValueError(f"perplexity: context_tokens must be >= 1, got {context_tokens}")
        from robusteval.llm.backends import LocalCausalLM, resolve_backend

        self.lm = backend if backend is not None else resolve_backend(None if model is None else f"local:{model}")
        if not isinstance(self.lm, LocalCausalLM):
            raise RobustevalError("perplexity needs a local causal LM (model=<folder or hub id>)")
        self.center = center
        self.width = width
        self.max_tokens = max_tokens
        self.context, self.context_tokens = context, int(context_tokens)

    def prefix(self, sample: Sample) -> str | None:
        """The text a response is scored after: a dialogue's turns (``context="auto"``), else None."""
        if self.context == "auto" and sample.task == "dialogue" and sample.context:
            return "\n".join(sample.context) + "\n"
        return None

    def _memo_key(self, s: Sample) -> Any:
        """With ``context="none"`` only the response (and declared language) is read: the same
        reply after two contexts, or as a summary, is one LM call, not two."""
        if self.context == "none":
            return (s.response, (s.meta or {}).get("language"))
        return super()._memo_key(s)

    def signature(self) -> str:
        return (f"model={self.lm.identity},center={self.center},width={self.width},max_tokens={self.max_tokens},"
                f"step={STEP},context={self.context}" + (f",context_tokens={self.context_tokens}"
                                                   if self.context != "none" else ""))

    def _analyze(self, samples: list[Sample]) -> list[dict[str, Any]]:
        prefixes = [self.prefix(s) for s in samples]
        nll = self.lm.text_nll([s.response for s in samples], max_tokens=self.max_tokens, prefixes=prefixes,
                               max_prefix_tokens=self.context_tokens)
        rows = []
        for v, p in zip(np.asarray(nll, dtype=float), prefixes, strict=True):
            log_ppl = float(min(v, 50.0))
            if math.isfinite(log_ppl):
                log_ppl = round(log_ppl / STEP) * STEP
            z = (log_ppl - math.log(self.center)) / self.width
            rows.append({"perplexity": float(math.exp(log_ppl)), "given_context": p is not None,
                         "suspicion": 1.0 / (1.0 + math.exp(-z))})
        return rows
