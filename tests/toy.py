"""Toy victims shared by the tests (real Metric subclasses, so every input check runs)."""

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
