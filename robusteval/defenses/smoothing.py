"""``smooth(metric, perturbation, n, seed, alpha)``: randomized median smoothing of any metric.

The smoothed score of a response is the median of the base metric over ``n`` random
perturbations of it (:mod:`robusteval.defenses.perturbations`), drawn from a generator seeded
by (seed, response): the same text always gets the same draws, so the score is deterministic
for a seed. An attacker who changes a few words moves the median only within bounds that
:meth:`SmoothedMetric.certify` computes (median smoothing, Chiang et al. 2020; for word
substitutions SAFER, Ye et al. 2020, and RanMASK, Zeng et al. 2021; the derivation is in
:mod:`robusteval.defenses.certificate` and docs/smoothing.md).

The result is a :class:`~robusteval.metrics.Metric`: it can be attacked, guarded
(``detectors.guard(smooth(m), ...)``), compared and scored like any other. All draws of a
batch go to the base metric in one call, each distinct text once. A draw that comes out
blank (every unit masked) scores ``empty_score`` and is counted (``blank_draw``).

    >>> from robusteval import metrics, Sample
    >>> from robusteval.defenses import smooth
    >>> m = smooth(metrics.load("rougeL"), perturbation="mask", n=16, seed=0)
    >>> s = Sample(id="a", task="summarization", response="the cat sat on the mat", reference="a cat sat on a mat")
    >>> float(m.score([s])[0]) == float(m.score([s])[0])
    True
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from robusteval.defenses import certificate
from robusteval.defenses.perturbations import Perturbation, load
from robusteval.errors import InputError
from robusteval.metrics.base import Metric, score_or_refuse
from robusteval.text import check_sample_text, is_blank
from robusteval.types import Sample
from robusteval.units import units_of


@dataclass(frozen=True)
class Certificate:
    """Certified bounds of one sample's smoothed score at one radius."""

    sample_id: str
    score: float
    radius: int
    lower: float
    upper: float
    delta: float
    units: int

    def within(self, tolerance: float) -> bool:
        """Whether the bounds stay within ``tolerance`` points of the score on both sides."""
        return self.score - self.lower <= tolerance and self.upper - self.score <= tolerance


class SmoothedMetric(Metric):
    """``metric`` smoothed by the median over ``n`` random perturbations (module docstring)."""

    def __init__(self, metric: Metric, perturbation: str | Perturbation = "synonym", n: int = 32, seed: int = 0,
                 alpha: float = 0.05, **perturbation_options: Any) -> None:
        from robusteval.metrics.function import ensure_metric

        metric = ensure_metric(metric)  # a name, module:attr or plain function works too
        super().__init__(on_empty=metric.on_empty, empty_score=metric.empty_score)
        if n < 1:
            raise ValueError(f"smoothing needs n >= 1 draws, got {n}")
        if not 0.0 < alpha < 1.0:
            raise ValueError(f"alpha must be in (0, 1), got {alpha}")
        self.metric = metric
        self.perturbation = load(perturbation, **perturbation_options)
        self.n, self.seed, self.alpha = int(n), int(seed), float(alpha)
        from functools import partial

        from robusteval.execution import recipe_of, remember_factory

        inner = recipe_of(metric)
        if inner is not None and isinstance(perturbation, str):  # what a Ray worker rebuilds it from
            remember_factory(self, partial(_rebuild_smoothed, inner, perturbation, self.n, self.seed, self.alpha,
                                           perturbation_options))
        self.name = f"smoothed-{metric.name}"  # type: ignore[misc]
        self.requires_reference = metric.requires_reference  # type: ignore[misc]
        self.tasks = metric.tasks  # type: ignore[misc]
        self.aspect = metric.aspect
        self.draws_scored = 0
        self.samples_scored = 0
        self._last_draws: dict[tuple[str, str], np.ndarray] = {}  # the last batch's draw scores (compute)

    def __getattr__(self, item: str) -> Any:
        # the base metric's settings show through; a guard's per-text record does not (it
        # describes the draws, not the text this metric was asked about)
        if item in ("metric", "details", "refused", "policy", "pressure_of", "screen"):
            raise AttributeError(item)
        return getattr(self.metric, item)

    def check_sample(self, sample: Sample) -> None:
        self.metric.check_sample(sample)

    def signature(self) -> str:
        p = ",".join(f"{k}={v}" for k, v in sorted(self.perturbation.describe().items()) if k != "certifies")
        return f"{self.metric.reproducibility()}|smooth=median,n={self.n},seed={self.seed},alpha={self.alpha},{p}"

    def _rng(self, response: str) -> random.Random:
        digest = hashlib.sha256(f"{self.seed}|{response}".encode("utf-8", "surrogatepass")).hexdigest()
        return random.Random(int(digest[:16], 16))

    def draws(self, response: str) -> list[str]:
        """The ``n`` perturbed versions of ``response`` this metric scores (seeded)."""
        rng = self._rng(response)
        return [self.perturbation(response, rng) for _ in range(self.n)]

    def draw_scores(self, samples: Sequence[Sample]) -> np.ndarray:
        """[len(samples), n]: the base metric's score of every draw, in one batched call
        (each distinct (sample, text) once)."""
        samples = list(samples)
        texts = [self.draws(s.response) for s in samples]
        index: dict[tuple[int, str], int] = {}
        batch: list[Sample] = []
        for i, (s, ts) in enumerate(zip(samples, texts, strict=True)):
            for t in ts:
                if not is_blank(t) and (i, t) not in index:
                    index[(i, t)] = len(batch)
                    batch.append(s.with_response(t))
        scored, refused = score_or_refuse(self.metric, batch) if batch else (np.zeros(0), np.zeros(0, dtype=bool))
        if refused.any():  # a reject guard inside: a refused draw scores as a blank one, counted
            scored = np.where(refused, self.metric.empty_score, scored)
            self.fallbacks["refused_draw"] += int(refused.sum())
        self.draws_scored += len(batch)
        self.samples_scored += len(samples)
        out = np.empty((len(samples), self.n))
        for i, ts in enumerate(texts):
            for j, t in enumerate(ts):
                if is_blank(t):
                    out[i, j] = self.metric.empty_score
                    self.fallbacks["blank_draw"] += 1
                else:
                    out[i, j] = scored[index[(i, t)]]
        return out

    def _score(self, samples: list[Sample]) -> np.ndarray:
        values = self.draw_scores(samples)
        self._last_draws = {(s.id, s.response): v for s, v in zip(samples, values, strict=True)}
        return np.median(values, axis=1)

    def unit_distances(self, response: str) -> list[float]:
        """Per unit of ``response``, the perturbation's worst-case distance (see certificate)."""
        return [self.perturbation.unit_distance(u) for u in units_of(response).units]

    def _certifiable(self, samples: Sequence[Sample]) -> list[Sample]:
        if self.perturbation.certifies is None:
            raise ValueError(f"the {self.perturbation.name} perturbation has no certificate "
                             "(use synonym or mask)")
        samples = list(samples)
        for s in samples:  # score()'s checks: invalid or missing text is an error naming the sample
            check_sample_text(s)
            if is_blank(s.response):
                raise InputError(s.id, "response", "empty or invisible-only response: nothing to certify")
            self.check_sample(s)
        return samples

    def certify(self, samples: Sequence[Sample], radius: int = 1, observed: bool = True) -> list[Certificate]:
        """Per sample, bounds for every response within ``radius`` changed units (of the kind
        ``self.perturbation.certifies``; same units and separators, see
        :func:`~robusteval.units.changed_units`). ``observed``: they contain the
        observed smoothed score of any such response chosen independently of the seed with
        probability >= 1 - alpha; ``observed=False``: the population median of all of them at
        once. Raises for a perturbation without a certificate."""
        samples = self._certifiable(samples)
        values = self.draw_scores(samples)
        out = []
        for s, v in zip(samples, values, strict=True):
            dist = self.unit_distances(s.response)
            lo, hi = certificate.bounds(v, dist, radius, self.alpha, observed=observed)
            out.append(Certificate(sample_id=s.id, score=float(np.median(v)), radius=radius, lower=lo, upper=hi,
                                   delta=certificate.delta(dist, radius), units=len(dist)))
        return out

    def certified_radius(self, samples: Sequence[Sample], tolerance: float, max_radius: int = 10) -> list[int]:
        """Per sample, the largest radius (up to ``max_radius``) at which the certified bounds of
        the observed score stay within ``tolerance`` points of the smoothed score; -1 when even
        radius 0 does not (too few draws for that tolerance)."""
        samples = self._certifiable(samples)
        values = self.draw_scores(samples)
        return [self._radius(v, self.unit_distances(s.response), tolerance, max_radius)
                for s, v in zip(samples, values, strict=True)]

    def _radius(self, values: np.ndarray, dist: list[float], tolerance: float, max_radius: int) -> int:
        med = float(np.median(values))
        best = -1
        for k in range(0, max_radius + 1):
            lo, hi = certificate.bounds(values, dist, k, self.alpha)
            if med - lo > tolerance or hi - med > tolerance:
                break
            best = k
        return best

    def compute_extras(self, samples: Sequence[Sample], scores: np.ndarray, radius: int = 1,
                       tolerance: float | None = None) -> tuple[dict[str, Any], dict[str, list[Any]]]:
        """What ``compute`` adds for a smoothed metric, from the draws it just scored (no second
        pass): per item the certified ``lower`` / ``upper`` bounds of the observed score for
        any text within ``radius`` changed units (:meth:`certify`), and with ``tolerance`` the
        ``certified_radius`` (:meth:`certified_radius`); None for an item without draws (a
        blank response scored as ``empty_score``). A perturbation without a certificate
        (``char``) adds only the smoothing settings."""
        summary: dict[str, Any] = {"smoothing": {"n": self.n, "seed": self.seed, "alpha": self.alpha,
                                                 **self.perturbation.describe()}}
        if self.perturbation.certifies is None:
            summary["certificate"] = None
            return summary, {}
        summary["certificate"] = {"radius": int(radius), "tolerance": tolerance, "alpha": self.alpha}
        per_item: dict[str, list[Any]] = {"lower": [], "upper": []}
        if tolerance is not None:
            per_item["certified_radius"] = []
        for s in samples:
            v = self._last_draws.get((s.id, s.response))
            dist = self.unit_distances(s.response) if v is not None else []
            lo, hi = certificate.bounds(v, dist, int(radius), self.alpha) if v is not None else (None, None)
            per_item["lower"].append(None if lo is None else float(lo))
            per_item["upper"].append(None if hi is None else float(hi))
            if tolerance is not None:
                per_item["certified_radius"].append(None if v is None else self._radius(v, dist, tolerance, 10))
        return summary, per_item

    def report(self) -> dict[str, Any]:
        inner = self.metric.report()
        return {**inner, "metric": self.name, "reproducibility": self.reproducibility(),
                "fallbacks": {**(inner.get("fallbacks") or {}), **dict(self.fallbacks)},
                "smoothing": {"n": self.n, "seed": self.seed, "alpha": self.alpha, **self.perturbation.describe(),
                              "samples_scored": self.samples_scored, "draws_scored": self.draws_scored}}


def certified_fraction(radii: Sequence[int], radius: int,
                       clusters: Sequence[str] | None = None) -> dict[str, Any]:
    """The share of samples whose certified radius (:meth:`SmoothedMetric.certified_radius`) is
    at least ``radius``: ``{certified, n, rate, ci, ci_method}`` -- the one function behind every
    certified fraction robusteval reports. ``clusters`` (each sample's conversation) make the
    interval resample conversations where several samples share one, as the ASR beside it does."""
    from robusteval.stats import proportion

    return proportion([int(r) >= radius for r in radii], clusters, names=("certified", "rate"))


def _rebuild_smoothed(metric: Any, perturbation: str, n: int, seed: int, alpha: float,
                      options: dict[str, Any]) -> SmoothedMetric:
    from robusteval.execution.base import unship

    return SmoothedMetric(unship(metric), perturbation, n=n, seed=seed, alpha=alpha, **options)


def smooth(metric: Metric, perturbation: str | Perturbation = "synonym", n: int = 32, seed: int = 0,
           alpha: float = 0.05, **perturbation_options: Any) -> SmoothedMetric:
    """``metric`` smoothed by the median over ``n`` seeded random perturbations (module docstring).

    ``perturbation``: ``synonym`` (default; ``rate=1.0``, ``max_set=16``), ``mask``
    (``rate=0.3``, ``token=""``) or ``char`` (``rate=0.05``; no certificate); its options go
    in ``perturbation_options``. ``alpha`` is the certificate's failure probability."""
    return SmoothedMetric(metric, perturbation, n=n, seed=seed, alpha=alpha, **perturbation_options)
