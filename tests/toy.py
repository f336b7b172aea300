"""Toy victims shared by the tests (real Metric subclasses, so every input check runs) and a
scripted stand-in LLM backend for the judge tests."""

from __future__ import annotations

import time

import numpy as np

from robusteval.metrics.base import Metric


class LengthMetric(Metric):
    """Test victim: ``per_word`` points per whitespace token, capped at 100; ``delay`` seconds
    per sample makes a run slow enough to kill mid-way."""

    name = "length"

    def __init__(self, delay: float = 0.0, per_word: float = 5.0) -> None:
        super().__init__()
        self.delay, self.per_word = delay, per_word

    def _score(self, samples):
        time.sleep(self.delay * len(samples))
        return np.array([min(100.0, self.per_word * len(s.response.split())) for s in samples])


class ScriptedLLM:
    """Test double of an LLM backend: ``answer(prompt)`` (a text or a list of texts, cycled to
    ``n``) or fixed ``outputs`` per call; ``probs(prompt, options)`` (or a fixed list) for
    probability mode. Records every prompt it is shown, and counts calls like a backend."""

    name = "scripted"

    def __init__(self, answer=None, outputs=("50",), probs=None):
        self.answer, self.outputs, self.probs = answer, list(outputs), probs
        self.calls = 0
        self.cache_hits = 0
        self.prompts: list[str] = []

    def generate(self, prompts, n=1, temperature=0.0, max_new_tokens=32, seed=0):
        self.calls += 1
        self.prompts += list(prompts)
        out = []
        for p in prompts:
            got = self.answer(p) if self.answer is not None else self.outputs
            texts = [got] if isinstance(got, str) else list(got)
            out.append([texts[i % len(texts)] for i in range(n)])
        return out

    def next_token_probs(self, prompts, options):
        self.calls += 1
        self.prompts += list(prompts)
        rows = [self.probs(p, options) if callable(self.probs) else
                (self.probs if self.probs is not None else [1.0] * len(options)) for p in prompts]
        arr = np.asarray(rows, dtype=float)
        return arr / arr.sum(axis=1, keepdims=True)
