"""``committee``: a jury of judges -- the median score, and a disagreement flag.

A single LLM judge has one prompt template and one model to fool; an attack tuned to it (a
universal phrase, a self-awarded score, a template-specific trigger) rarely moves differently
prompted or different judges the same way. Verga et al. 2024 ("Replacing Judges with Juries:
Evaluating LLM Generations with a Panel of Diverse Models", PoLL) find a panel of smaller,
diverse judges agrees better with people than one large judge and shows less intra-model bias;
issue 16 cites multi-model committees cutting attack success to 10-19 %. Two defenses follow:

* the score is the **median** of the members' 0-100 scores, so one fooled member cannot move
  it past the others;
* the members' **disagreement** (``spread``: ``range`` = max - min, or ``mad`` = the median
  absolute deviation from the median, robust to one outlier in larger committees) marks the
  samples where the jury is split. ``on_disagreement="median"`` just reports it
  (:meth:`Committee.member_details`, :meth:`Committee.disagreement`); ``"abstain"`` scores a sample
  whose spread reaches ``threshold`` at ``abstain_score`` (default 0, a conservative floor: a
  text the jury cannot agree on earns nothing) and counts it in ``report()["fallbacks"]
  ["abstained"]``. The ``committee`` detector (``robusteval.detectors.committee``) turns the
  same spread into a suspicion, so a guard can flag or floor on disagreement.

Members are any metrics: a name (``"rougeL"``), a ``{"name": ..., "options": {...}}`` dict,
a dict of LLM-judge options (``{"template": "adveval-dialogue", "backend": "openai:gpt-4o"}``:
several templates and/or models), or a metric object.

Members of different kinds (an LLM judge, a trained cross-encoder, BERTScore) score on
scales of their own: one judge's good replies sit at 30-38 of 100, a cross-encoder's at 60-80.
A median or a range over raw scores would then say more about the scales than about the text.
``normalize="quantile"`` puts every member on one scale first: a member's score becomes its
percentile among its own scores of ``calibration`` -- clean texts the user supplies, never the
texts under test: the mid-rank ``100 * (#{c < x} + #{c == x} / 2) / n`` at a calibration
score, interpolated linearly between two of them, with exponential tails toward 0 and 100
beyond them (:func:`quantile_scale`: strictly increasing, so texts tie only where raw scores
tie). The median and the spread are then in percentile points
(``threshold`` too). This is the usual way to pool
heterogeneous raters (rank or quantile normalization); the committee papers pool judges
that share one 1-5 scale and need none.

    >>> from robusteval import metrics
    >>> jury = metrics.load("committee", members=[  # doctest: +SKIP
    ...     {"template": "geval"}, {"template": "adveval-dialogue"},
    ...     {"template": "geval", "backend": "openai:gpt-4o-mini"}],
    ...     on_disagreement="abstain")
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from robusteval.errors import InputError
from robusteval.metrics.base import Metric
from robusteval.metrics.inner import failure_marks, fallback_counters, forget_failures
from robusteval.metrics.registry import register_metric
from robusteval.text import check_sample_text, is_blank
from robusteval.types import Sample

SPREADS = ("range", "mad")
SPREAD_MAX = {"range": 100.0, "mad": 50.0}  # the largest spread 0-100 scores can have
DEFAULT_THRESHOLD = 0.3  # of SPREAD_MAX: a 30-point range, a 15-point MAD
ON_DISAGREEMENT = ("median", "abstain")
NORMALIZE = ("none", "quantile")


def quantile_scale(scores: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """Each score's percentile (0-100) among the ``reference`` scores (at least two distinct
    values): at a reference value its mid-rank, ``100 * (#{r < x} + #{r == x} / 2) / n``;
    between two reference values the straight line between their mid-ranks; beyond the lowest
    (highest) value an exponential tail from its mid-rank toward 0 (100), with the mean gap
    between distinct reference values as its scale. Strictly increasing, so two texts tie only
    where the member's raw scores tie: a step function, or a clip at 0 and 100, would tie texts
    that differ, and a tie counts as a fooled R- comparison. (The mid-rank is scipy's
    ``percentileofscore(kind="mean")``.)"""
    values, counts = np.unique(reference, return_counts=True)
    if len(values) < 2:
        raise ValueError("a quantile scale needs at least two distinct calibration scores")
    below = np.concatenate(([0], np.cumsum(counts)[:-1]))
    mid = 100.0 * (below + counts / 2.0) / len(reference)
    gap = float(values[-1] - values[0]) / (len(values) - 1)
    x = np.asarray(scores, dtype=np.float64)
    out = np.interp(x, values, mid)
    low, high = x < values[0], x > values[-1]
    out[low] = mid[0] * np.exp((x[low] - values[0]) / gap)
    out[high] = 100.0 - (100.0 - mid[-1]) * np.exp(-(x[high] - values[-1]) / gap)
    return out


def spread(scores: np.ndarray, kind: str = "range") -> np.ndarray:
    """Per sample (column), how far the members (rows) are apart: ``range`` (max - min) or
    ``mad`` (median absolute deviation from the median)."""
    scores = np.asarray(scores, dtype=np.float64)
    if kind == "range":
        return scores.max(axis=0) - scores.min(axis=0)
    if kind == "mad":
        return np.median(np.abs(scores - np.median(scores, axis=0)), axis=0)
    raise ValueError(f"spread must be one of {SPREADS}, got {kind!r}")


def build_member(spec: Any) -> Any:
    """A member metric from a name (or ``module:attr``), a ``{name, options}`` dict, a dict of
    LLM-judge options, an object with ``score``, or a plain function
    ``f(predictions, references=None, sources=None)`` (:func:`robusteval.metrics.as_metric`)."""
    from robusteval import metrics

    if callable(getattr(spec, "score", None)):
        return spec
    if callable(spec) and not isinstance(spec, type):
        return metrics.as_metric(spec)
    if isinstance(spec, str):
        return metrics.load(spec)
    if isinstance(spec, dict):
        if "name" in spec:
            extra = {k: v for k, v in spec.items() if k not in ("name", "options")}
            return metrics.load(str(spec["name"]), **{**(spec.get("options") or {}), **extra})
        return metrics.load("llm-judge", **spec)
    raise TypeError(f"a committee member is a metric name, a {{name, options}} dict, a dict of llm-judge "
                    f"options, a metric object or a plain function, got {spec!r}")


def member_label(i: int, member: Any) -> str:
    """``"1:llm-judge/geval"``: position, name and (for a judge) template."""
    template = getattr(member, "template_name", None)
    return f"{i}:{getattr(member, 'name', type(member).__name__)}" + (f"/{template}" if template else "")


@register_metric("committee", family="defense",
                 source="Verga et al. 2024 (Replacing Judges with Juries, PoLL); issue 16: multi-model "
                        "committees cut ASR to 10-19 %")
class Committee(Metric):
    """The median of several metrics' scores, with their disagreement (module docstring).

    Options: ``members`` (at least two), ``spread`` (``range`` or ``mad``), ``threshold``
    (the spread in points at or above which the jury disagrees; default 30 for ``range``, 15
    for ``mad``: calibrate it on clean data), ``on_disagreement`` (``median`` or
    ``abstain``), ``abstain_score`` (default 0), ``normalize`` (``none``, or ``quantile``:
    each member's score as its percentile among its scores of ``calibration``, a list of
    clean samples or anything :func:`robusteval.data.load` takes; ``data_dir`` for a dataset
    name)."""

    name: ClassVar[str] = "committee"

    def __init__(self, members: Sequence[Any], spread: str = "range", threshold: float | None = None,
                 on_disagreement: str = "median", abstain_score: float = 0.0, normalize: str = "none",
                 calibration: Sequence[Sample | dict[str, Any]] | str | os.PathLike[str] | None = None,
                 data_dir: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if normalize not in NORMALIZE:
            raise ValueError(f"normalize must be one of {NORMALIZE}, got {normalize!r}")
        if normalize == "quantile" and calibration is None:
            raise ValueError("normalize='quantile' needs calibration: clean samples (or a dataset) scored by every "
                             "member to set its scale")
        if normalize == "none" and calibration is not None:
            raise ValueError("calibration is only used with normalize='quantile'")
        self.normalize, self._calibration_spec, self._data_dir = normalize, calibration, data_dir
        self._calibration: list[Sample] | None = None
        self._reference: list[np.ndarray] | None = None
        self._identity: str | None = None
        self._calibration_fallbacks: dict[str, dict[str, int]] = {}
        if isinstance(members, str | dict) or len(members) < 2:
            raise ValueError("a committee needs a list of at least two members")
        if spread not in SPREADS:
            raise ValueError(f"spread must be one of {SPREADS}, got {spread!r}")
        if on_disagreement not in ON_DISAGREEMENT:
            raise ValueError(f"on_disagreement must be one of {ON_DISAGREEMENT}, got {on_disagreement!r}")
        if threshold is None:
            threshold = DEFAULT_THRESHOLD * SPREAD_MAX[spread]
        if not 0.0 <= float(threshold) <= SPREAD_MAX[spread]:
            raise ValueError(f"threshold must be within [0, {SPREAD_MAX[spread]:g}] for spread={spread}")
        if not 0.0 <= float(abstain_score) <= 100.0:
            raise ValueError("abstain_score must be within [0, 100]")
        self.members = [build_member(m) for m in members]
        self.labels = [member_label(i, m) for i, m in enumerate(self.members)]
        self.spread, self.threshold = spread, float(threshold)
        self.on_disagreement, self.abstain_score = on_disagreement, float(abstain_score)
        self.requires_reference = any(getattr(m, "requires_reference", False) for m in self.members)  # type: ignore[misc]
        tasks = [set(getattr(m, "tasks", ())) for m in self.members if getattr(m, "tasks", None)]
        if tasks:
            self.tasks = tuple(t for t in self.tasks if all(t in s for s in tasks))  # type: ignore[misc]

    def check_sample(self, sample: Sample) -> None:
        for m in self.members:
            check = getattr(m, "check_sample", None)
            if callable(check):
                check(sample)

    def member_scores(self, samples: Sequence[Sample]) -> np.ndarray:
        """Members x samples matrix of 0-100 scores (samples checked as :meth:`score` does;
        a blank response is an error here: there is nothing to judge)."""
        samples = list(samples)
        for s in samples:
            self._check_judgeable(s)
        return self._matrix(samples)

    def _check_judgeable(self, s: Sample) -> None:
        """Valid text, a non-blank response, and what every member needs (a reference...)."""
        check_sample_text(s)
        if is_blank(s.response):
            raise InputError(s.id, "response", f"{self.name} cannot judge an empty response")
        self.check_sample(s)

    def _raw(self, samples: list[Sample]) -> np.ndarray:
        rows = []
        for label, m in zip(self.labels, self.members, strict=True):
            got = np.asarray(m.score(samples), dtype=np.float64)
            if got.shape != (len(samples),) or not np.all(np.isfinite(got)):
                raise InputError(samples[0].id if samples else "?", "response",
                                 f"committee member {label} returned no finite score per sample")
            rows.append(got)
        return np.vstack(rows)

    def calibration(self) -> list[Sample]:
        """The clean samples that set each member's scale (``normalize="quantile"``), loaded and
        checked once: each must be a text every member can score."""
        if self._calibration is None:
            spec = self._calibration_spec
            if isinstance(spec, str) or hasattr(spec, "__fspath__"):
                from robusteval import data

                spec = data.load(spec, self._data_dir)
            samples = [Sample.from_dict(x) if isinstance(x, dict) else x for x in spec]
            bad = next((x for x in samples if not isinstance(x, Sample)), None)
            if not samples or bad is not None:
                raise ValueError("committee calibration must be a non-empty list of samples (or sample dicts) or a "
                                 f"dataset, got {'an empty list' if not samples else type(bad).__name__}")
            for x in samples:
                try:
                    self._check_judgeable(x)
                except InputError as exc:
                    raise InputError(x.id, "response", f"committee calibration sample: {exc}") from None
            self._calibration = samples
        return self._calibration

    def _scales(self) -> list[np.ndarray]:
        if self._reference is None:
            # the calibration's fallbacks are the scale's, not the scored texts': kept apart
            counters = [fallback_counters(m) for m in self.members]
            before = [[Counter(c) for c in cs] for cs in counters]
            marks = failure_marks(self)
            rows = self._raw(self.calibration())
            forget_failures(marks)  # a calibration sample's failed request is not a scored sample's
            for label, cs, was in zip(self.labels, counters, before, strict=True):
                extra: Counter[str] = Counter()
                for counter, w in zip(cs, was, strict=True):
                    extra += counter - w
                    counter.clear()
                    counter.update(w)
                if extra:
                    self._calibration_fallbacks[label] = dict(extra)
            for label, row in zip(self.labels, rows, strict=True):
                if len(np.unique(row)) < 2:
                    raise ValueError(f"committee member {label} gave every calibration sample the same score "
                                     f"({row[0]:g}): no scale to put its scores on")
            self._reference = [np.sort(row) for row in rows]
        return self._reference

    def _matrix(self, samples: list[Sample]) -> np.ndarray:
        raw = self._raw(samples)
        if self.normalize == "none":
            return raw
        return np.vstack([quantile_scale(row, ref) for row, ref in zip(raw, self._scales(), strict=True)])

    def disagreement(self, samples: Sequence[Sample]) -> list[float]:
        """The members' spread per sample (points on 0-100; see ``spread``)."""
        return [float(x) for x in spread(self.member_scores(samples), self.spread)]

    def member_details(self, samples: Sequence[Sample]) -> list[dict[str, Any]]:
        """Per sample: each member's score, the median, the spread, whether the jury disagrees
        and the committee's score (the abstain score where it abstains)."""
        samples = list(samples)
        matrix = self.member_scores(samples)
        med, spr = np.median(matrix, axis=0), spread(matrix, self.spread)
        out = []
        for j, s in enumerate(samples):
            split = bool(spr[j] >= self.threshold)
            abstain = split and self.on_disagreement == "abstain"
            out.append({"id": s.id, "members": dict(zip(self.labels, matrix[:, j].tolist(), strict=True)),
                        "median": float(med[j]), "spread": float(spr[j]), "disagree": split,
                        "score": self.abstain_score if abstain else float(med[j])})
        return out

    def _score(self, samples: list[Sample]) -> np.ndarray:
        matrix = self._matrix(samples)
        out = np.median(matrix, axis=0)
        split = spread(matrix, self.spread) >= self.threshold
        if split.any():
            self.fallbacks["disagreed"] += int(split.sum())
            if self.on_disagreement == "abstain":
                self.fallbacks["abstained"] += int(split.sum())
                out[split] = self.abstain_score
        return out

    def report(self) -> dict[str, Any]:
        """Counters (``disagreed``, ``abstained``...) plus each member's own report."""
        members = [m.report() if callable(getattr(m, "report", None)) else {"metric": label}
                   for label, m in zip(self.labels, self.members, strict=True)]
        out = {**super().report(), "members": members}
        if self.normalize != "none":
            out["normalize"] = {"method": self.normalize, "calibration_n": len(self.calibration()),
                                "calibration_fallbacks": dict(self._calibration_fallbacks)}
        return out

    def fitted_state(self) -> dict[str, Any] | None:
        """The members' calibration scales, fitted here (on the driver) once, for the committees a
        Ray worker rebuilds from this one's recipe (:class:`robusteval.execution.base.Rebuild`):
        without it every worker would score the calibration set again with every member. None
        without ``normalize='quantile'``."""
        if self.normalize == "none":
            return None
        return {"calibration": self._calibration_identity(), "members": self.jury_signature(),
                "reference": [ref.tolist() for ref in self._scales()],
                "calibration_fallbacks": dict(self._calibration_fallbacks)}

    def load_fitted_state(self, state: dict[str, Any]) -> None:
        """Take the scales another committee fitted (:meth:`fitted_state`); refused unless its
        calibration set and members are this one's."""
        for key, mine in (("calibration", self._calibration_identity()), ("members", self.jury_signature())):
            if state.get(key) != mine:
                raise ValueError(f"committee: fitted scales of another {key} ({state.get(key)!r}, this one "
                                 f"{mine!r}) cannot be used")
        self._reference = [np.asarray(ref, dtype=float) for ref in state["reference"]]
        self._calibration_fallbacks = {k: dict(v) for k, v in state["calibration_fallbacks"].items()}

    def _calibration_identity(self) -> str:
        """What the members' scales depend on: every field of every calibration sample (a hash
        of their JSON, computed once)."""
        if self._identity is None:
            h = hashlib.sha256()
            for s in self.calibration():
                h.update(json.dumps(s.to_dict(), sort_keys=True, ensure_ascii=True, default=str).encode() + b"\n")
            self._identity = f"{len(self.calibration())}:{h.hexdigest()[:16]}"
        return self._identity

    def jury_signature(self) -> str:
        """The members' settings and the spread: what the disagreement values depend on."""
        parts = []
        for label, m in zip(self.labels, self.members, strict=True):
            sig = m.signature() if callable(getattr(m, "signature", None)) else ""
            parts.append(f"{label}({sig})")
        scale = (f"|normalize={self.normalize}({self._calibration_identity()})"
                 if self.normalize != "none" else "")
        return f"members=[{'; '.join(parts)}]|spread={self.spread}{scale}"

    def signature(self) -> str:
        return (f"{self.jury_signature()}|threshold={self.threshold:g}|on_disagreement={self.on_disagreement}"
                + (f"|abstain={self.abstain_score:g}" if self.on_disagreement == "abstain" else ""))
