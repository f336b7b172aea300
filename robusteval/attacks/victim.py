"""A victim metric behind an LRU score cache; real scoring and cache hits are counted apart."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np

from robusteval.metrics.base import score_or_refuse
from robusteval.metrics.inner import fallback_total, inner_metrics
from robusteval.types import Sample


class CachedVictim:
    """Scores (sample, text) pairs with ``metric``, batching cache misses into one call.

    The cache key is (sample id, text): a sample id always carries the same context and
    references, so the same text for the same sample is never scored twice.
    """

    def __init__(self, metric: Any, capacity: int = 100_000) -> None:
        self.metric = metric
        self.capacity = capacity
        self._cache: OrderedDict[tuple[str, str], float] = OrderedDict()
        self.model_calls = 0  # texts actually scored by the metric
        self.cache_hits = 0
        self.batches = 0
        self._parts: list[Any] | None = None  # what the metric is made of (metrics.inner)

    def _fallbacks(self) -> int:
        """:func:`fallback_total` of the metric. Its parts are walked again until a batch has
        been scored (a part built at the first scoring counts), then kept: the walk costs far
        more than the sum, and it is asked before and after every batch."""
        if self._parts is None or self.batches == 0:
            self._parts = inner_metrics(self.metric)
        return fallback_total(self.metric, self._parts)

    def __reduce__(self) -> tuple[Any, ...]:
        """Sent to another process (an executor's worker) as its metric -- or the recipe that
        builds it (:func:`robusteval.execution.shippable`) -- with an empty cache: a cached score
        without the guard's record of that scoring would leave the row without the guard's
        details. (So a fitting sample's row, left out of every ASR, can count a model call on a
        worker where the driver's cache, warm from fitting, counts a hit.)"""
        from robusteval.execution import shippable

        return (_rebuild_cached, (shippable(self.metric), self.capacity))

    @property
    def name(self) -> str:
        return str(getattr(self.metric, "name", type(self.metric).__name__))

    def score(self, sample: Sample, texts: Sequence[str]) -> np.ndarray:
        """Victim scores of ``texts`` as responses to ``sample``."""
        return self.score_with_status(sample, texts)[0]

    def score_with_status(self, sample: Sample, texts: Sequence[str]) -> tuple[np.ndarray, list[bool]]:
        """Scores and, per text, whether this call really scored it (the first occurrence of
        a text missing from the cache) rather than serving it from the cache."""
        out = np.zeros(len(texts))
        scored = [False] * len(texts)
        missing: dict[str, list[int]] = {}
        for i, t in enumerate(texts):
            key = (sample.id, t)
            if key in self._cache:
                self._cache.move_to_end(key)
                out[i] = self._cache[key]
                self.cache_hits += 1
            else:
                missing.setdefault(t, []).append(i)
        if missing:
            todo = list(missing)
            before = self._fallbacks()
            scores = self._score_texts(sample, todo)
            # a batch in which the metric fell back (an unparseable or failed LLM answer scored
            # as a midpoint, ...) is not cached: a later query asks again instead of reusing it
            cache = self._fallbacks() == before
            self.model_calls += len(todo)
            self.batches += 1
            for t, v in zip(todo, scores, strict=True):
                if cache:
                    self._cache[(sample.id, t)] = float(v)
                scored[missing[t][0]] = True
                for i in missing[t]:
                    out[i] = v
                self.cache_hits += len(missing[t]) - 1  # duplicates within the batch
            while len(self._cache) > self.capacity:
                self._cache.popitem(last=False)
        return out, scored

    def _score_texts(self, sample: Sample, texts: list[str]) -> np.ndarray:
        """The metric's scores; a text a ``reject`` guard refuses gets the clean original's score:
        to a search it is a step that changed nothing (neither a better R- candidate nor an R+
        move), and the runner writes the row as ``rejected`` (:meth:`is_rejected`), never with
        that score."""
        scores, refused = score_or_refuse(self.metric, [sample.with_response(t) for t in texts])
        if refused.any():
            neutral = self._cache.get((sample.id, sample.response))
            if neutral is None and sample.response not in texts:
                neutral = float(self.score(sample, [sample.response])[0])
            scores = np.where(refused, 0.0 if neutral is None or np.isnan(neutral) else neutral, scores)
        return scores

    def is_rejected(self, sample: Sample, text: str | None) -> bool:
        """Whether the victim's guard refused ``text`` as a response to ``sample`` (from the
        guard's own record of its last scoring of that text)."""
        refused = getattr(self.metric, "refused", None)
        return text is not None and callable(refused) and bool(refused(sample.with_response(text)))

    def score_one(self, sample: Sample, text: str) -> float:
        return float(self.score(sample, [text])[0])

    def counters(self) -> tuple[int, int]:
        return self.model_calls, self.cache_hits


def _rebuild_cached(metric: Any, capacity: int) -> CachedVictim:
    from robusteval.execution import unship

    return CachedVictim(unship(metric), capacity)
