"""The Metric contract (DESIGN.md): ``score(samples) -> ndarray`` of 0-100, higher is better.

:class:`Metric` does the shared input checks once, so every metric treats bad input the
same way:

* every text of every sample must be valid Unicode (no lone surrogates): else
  :class:`InputError` naming the sample and the field (:func:`robusteval.text.check_sample_text`);
* a sample whose response is empty or *blank* (whitespace, zero-width, control or other
  invisible characters only: :func:`robusteval.text.is_blank`) raises :class:`InputError`
  naming the sample (``on_empty="error"``, the default), or gets ``empty_score`` (default
  0.0) and is *counted* in :attr:`Metric.fallbacks` and :meth:`report` (``on_empty="floor"``);
* a reference-based metric given a sample without a (visible) reference raises
  :class:`InputError`;
* a score that comes back NaN/inf is an error (it never leaks into results);
* scores are clipped to [0, 100]; how many were clipped is counted too.
"""

from __future__ import annotations

import platform
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from robusteval.errors import InputError, RobustevalError
from robusteval.text import check_sample_text, is_blank
from robusteval.types import TASKS, Sample

ON_EMPTY = ("error", "floor")
AGAINST = ("reference", "first_reference", "context", "last_turn", "fact")


class Metric(ABC):
    """Base class of every victim metric. Subclasses implement :meth:`_score`."""

    name: ClassVar[str] = "metric"
    requires_reference: ClassVar[bool] = False
    tasks: ClassVar[tuple[str, ...]] = TASKS
    #: the quality aspect the metric scores (one of :data:`robusteval.aspects.ASPECTS`, or a
    #: custom one); the expectation criterion of Hu et al. 2024 (Table 19) depends on it
    aspect: str = "Overall_quality"

    def __init__(self, on_empty: str = "error", empty_score: float = 0.0) -> None:
        if on_empty not in ON_EMPTY:
            raise ValueError(f"on_empty must be one of {ON_EMPTY}, got {on_empty!r}")
        self.on_empty = on_empty
        self.empty_score = float(empty_score)
        self.fallbacks: Counter[str] = Counter()

    # -- public API ---------------------------------------------------------------------
    def score(self, samples: Sequence[Sample]) -> np.ndarray:
        """One float per sample, 0-100, higher is better; deterministic."""
        samples = list(samples)
        out = np.full(len(samples), np.nan, dtype=np.float64)
        todo: list[int] = []
        for i, s in enumerate(samples):
            check_sample_text(s)
            if is_blank(s.response):
                if self.on_empty == "error":
                    raise InputError(s.id, "response", f"empty or invisible-only response; {self.name} "
                                     "cannot score it (pass on_empty='floor' to score it as "
                                     "empty_score and count it)")
                out[i] = self.empty_score
                self.fallbacks["empty_response"] += 1
                continue
            self.check_sample(s)
            todo.append(i)
        if todo:
            raw = np.asarray(self._score([samples[i] for i in todo]), dtype=np.float64)
            if raw.shape != (len(todo),):
                raise RobustevalError(f"{self.name} returned {raw.shape} scores for {len(todo)} samples")
            bad = ~np.isfinite(raw)
            if bad.any():
                first = samples[todo[int(np.flatnonzero(bad)[0])]]
                raise InputError(first.id, "response", f"{self.name} produced a non-finite score")
            clipped = (raw < 0) | (raw > 100)
            if clipped.any():
                self.fallbacks["clipped_to_0_100"] += int(clipped.sum())
            out[todo] = np.clip(raw, 0.0, 100.0)
        return out

    def screened(self, samples: Sequence[Sample]) -> tuple[np.ndarray, np.ndarray]:
        """(scores, refused): :meth:`score` and which samples the metric refused to score (their
        score NaN). A plain metric refuses nothing; a guard with policy ``reject`` refuses the
        texts it flags instead of raising (``robusteval.detectors.guarded``)."""
        return self.score(samples), np.zeros(len(samples), dtype=bool)

    def check_sample(self, sample: Sample) -> None:
        """Raise InputError if ``sample`` lacks what this metric needs."""
        if self.requires_reference and all(is_blank(r) for r in sample.all_references()):
            raise InputError(sample.id, "reference", f"{self.name} needs a non-empty reference")

    def reproducibility(self) -> str:
        """A string that pins model, settings and versions (like bert-score's hash code)."""
        from robusteval import __version__

        return f"{self.name}|{self.signature()}|robusteval={__version__}|python={platform.python_version()}"

    def signature(self) -> str:
        return ""

    def report(self) -> dict[str, Any]:
        """Counters of fallbacks since the metric was loaded (empty responses, clipping...)."""
        return {"metric": self.name, "reproducibility": self.reproducibility(),
                "fallbacks": dict(self.fallbacks)}

    # -- to implement -------------------------------------------------------------------
    @abstractmethod
    def _score(self, samples: list[Sample]) -> np.ndarray:
        """Scores for samples that passed the checks."""


class PairMetric(Metric):
    """A metric comparing the response with one or more texts of the sample.

    ``against`` picks them: ``reference`` (all references, best score kept),
    ``first_reference`` (the dataset's main reference alone, e.g. SummEval's original CNN/DM
    highlight: the single-reference scoring of Mu & Lim's Table 2), ``context`` (the whole
    context), ``last_turn`` (the last context element) or ``fact``. ``context``,
    ``last_turn`` and ``fact`` turn the metric into a reference-free proxy; every choice shows in
    :meth:`reproducibility`.
    """

    requires_reference: ClassVar[bool] = True

    def __init__(self, against: str = "reference", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if against not in AGAINST:
            raise ValueError(f"against must be one of {AGAINST}, got {against!r}")
        self.against = against

    def targets(self, sample: Sample) -> tuple[str, ...]:
        if self.against == "reference":
            refs = tuple(r for r in sample.all_references() if not is_blank(r))
        elif self.against == "first_reference":
            refs = tuple(r for r in sample.all_references()[:1] if not is_blank(r))
        elif self.against == "context":
            refs = (sample.source_text(),) if not is_blank(sample.source_text()) else ()
        elif self.against == "last_turn":
            refs = (sample.context[-1],) if sample.context and not is_blank(sample.context[-1]) else ()
        else:
            refs = (sample.fact,) if sample.fact is not None and not is_blank(sample.fact) else ()
        return refs

    def check_sample(self, sample: Sample) -> None:
        if not self.targets(sample):
            field = "reference" if self.against in ("reference", "first_reference") else self.against
            raise InputError(sample.id, field, f"{self.name} needs a non-empty {field} "
                             f"(against={self.against!r})")

    def signature(self) -> str:
        return f"against={self.against}"


def score_or_refuse(metric: Any, samples: Sequence[Sample]) -> tuple[np.ndarray, np.ndarray]:
    """``metric.screened(samples)`` for any object with ``score`` (attack victims and score logs
    take metric-like objects too): refused samples are marked, never an abort."""
    screened = getattr(metric, "screened", None)
    if callable(screened):
        scores, refused = screened(samples)
        return np.asarray(scores, dtype=float), np.asarray(refused, dtype=bool)
    return np.asarray(metric.score(samples), dtype=float), np.zeros(len(samples), dtype=bool)
