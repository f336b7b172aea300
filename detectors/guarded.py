"""``guard(metric, detectors, policy)``: a Metric that screens its inputs with detectors.

The guarded metric is itself a :class:`~robusteval.metrics.Metric`, so it can be attacked
(adaptive attacks) and compared like any other. Policies (in the spirit of guardrails-style
validators with explicit on-fail actions):

* ``flag`` — scores unchanged; flags and suspicions are reported;
* ``penalize`` — the score is multiplied by ``1 - penalty`` for every detector that flags
  the sample (default penalty 0.5: one flag halves it, two quarter it);
* ``floor`` — a flagged sample scores 0;
* ``reject`` — a flagged sample raises :class:`GuardRejection` naming it and the detectors.
  An attack run does not abort: the runner scores through :meth:`GuardedMetric.screened`
  (:func:`robusteval.metrics.base.score_or_refuse`), which reports rejections instead of
  raising, and writes them as rows with outcome ``rejected`` (or ``original_rejected`` when
  the clean original itself is refused);
* ``sanitize`` — the *fix* action: role prefixes, invisible and control characters and
  mixed-script homoglyphs are removed (:func:`robusteval.detectors.sanitize.sanitize`), the
  detectors screen the cleaned text, the wrapped metric scores it, and a cleaned text that is
  still flagged scores 0 (as with ``floor``). What was removed is in :meth:`details`.

Inputs pass :meth:`Metric.score`'s checks before any detector or the wrapped metric sees them
(the same for every policy): a lone surrogate in any field is an InputError naming the sample
and the field; a blank (invisible-only) response follows the wrapped metric's ``on_empty``,
and a fallback is counted in the guard's report.

Per-sample details (raw score, guarded score, each detector's suspicion and flag, and the
text's :func:`pressure`) are kept
for every scored (sample id, response) and returned by :meth:`GuardedMetric.details`; the
``score`` and ``attack`` commands write them into their outputs.
"""

from __future__ import annotations

import os
from collections import Counter, OrderedDict
from collections.abc import Sequence
from functools import partial
from typing import Any

import numpy as np
from robusteval.detectors import parsing
from robusteval.detectors.base import Detector, check_unique
from robusteval.detectors.sanitize import Sanitized, sanitize

from robusteval.errors import InputError
from robusteval.metrics.base import Metric
from robusteval.text import is_blank
from robusteval.types import Sample

POLICIES = ("flag", "penalize", "floor", "reject", "sanitize")


PRESSURE_CAP = 1000.0


def pressure(suspicion: np.ndarray, thresholds: np.ndarray) -> np.ndarray:
    """Per text, how close the guard is to flagging it: the largest suspicion / threshold over
    the detectors, at least 1 exactly when some detector flags it (suspicion >= threshold),
    capped at :data:`PRESSURE_CAP`. A detector-aware attack searches for texts whose pressure
    stays below 1 (:mod:`robusteval.attacks.evasion`)."""
    # a detector's suspicion is in [0, 1]; NaN (a detector that failed) counts as certain
    susp = np.clip(np.nan_to_num(np.atleast_2d(np.asarray(suspicion, dtype=float)), nan=1.0), 0.0, 1.0)
    thr = np.atleast_2d(np.asarray(thresholds, dtype=float))
    with np.errstate(over="ignore"):  # a calibrated threshold can be tiny ("> 0"): the ratio is capped below
        ratio = np.where(thr > 0, susp / np.where(thr > 0, thr, 1.0), np.where(susp > 0, PRESSURE_CAP, 0.0))
    ratio = np.where(susp >= thr, np.maximum(ratio, 1.0), np.minimum(ratio, np.nextafter(1.0, 0.0)))
    return np.minimum(ratio, PRESSURE_CAP).max(axis=1) if ratio.shape[1] else np.zeros(len(ratio))


class GuardRejection(InputError):
    """A guarded metric with policy ``reject`` refused a flagged sample."""


class GuardedMetric(Metric):
    """``metric`` behind ``detectors`` with a policy; see the module docstring."""

    def __init__(self, metric: Metric, detectors: Sequence[Detector], policy: str = "floor",
                 penalty: float = 0.5, thresholds: str | os.PathLike[str] | None = None,
                 prefetch: bool | None = None) -> None:
        super().__init__(on_empty=metric.on_empty, empty_score=metric.empty_score)
        if policy not in POLICIES:
            raise ValueError(f"guard policy must be one of {POLICIES}, got {policy!r}")
        if not 0.0 <= penalty <= 1.0:
            raise ValueError(f"guard penalty must be in [0, 1], got {penalty}")
        if not detectors:
            raise ValueError("guard needs at least one detector")
        check_unique(detectors)
        self.metric = metric
        self.detectors = list(detectors)
        self.policy = policy
        self.penalty = penalty
        self.thresholds = str(thresholds) if thresholds else None
        # parse the detectors' texts in a helper while the metric scores: by default where the
        # metric leaves the CPU idle (GPU, server); it changes no number, only the time
        self.prefetch = metric.leaves_cpu_idle() if prefetch is None else bool(prefetch)
        self.name = f"guarded-{metric.name}"  # type: ignore[misc]
        self.requires_reference = metric.requires_reference  # type: ignore[misc]
        self.tasks = metric.tasks  # type: ignore[misc]
        self.aspect = metric.aspect
        self.flag_counts: Counter[str] = Counter()
        self.scored = 0
        self._details: OrderedDict[tuple[str, str], dict[str, Any]] = OrderedDict()
        self._refuse = True  # policy reject: raise GuardRejection (False inside screened())
        from robusteval.execution import recipe_of, remember_factory

        parts = [recipe_of(metric), *(recipe_of(d) for d in self.detectors)]
        if all(p is not None for p in parts):  # a Ray worker builds the same guard from its parts' recipes
            remember_factory(self, partial(_rebuild_guard, parts[0], parts[1:], policy, penalty, self.thresholds,
                                           prefetch))

    def __getattr__(self, item: str) -> Any:
        # the wrapped metric's settings (e.g. ``aspect`` of an LLM judge) show through
        if item == "metric":
            raise AttributeError(item)
        return getattr(self.metric, item)

    def check_sample(self, sample: Sample) -> None:
        self.metric.check_sample(sample)

    def signature(self) -> str:
        from robusteval.detectors import defaults

        dets = ";".join(f"{d.name}[{d.identity()}]@" + (f"default[{defaults.version()}]" if d.threshold_source
                                                          == "default" else f"{d.threshold:.6g}")
                        for d in self.detectors)
        return f"{self.metric.reproducibility()}|guard={self.policy},penalty={self.penalty}|{dets}"

    def screen(self, samples: Sequence[Sample]) -> tuple[np.ndarray, np.ndarray]:
        """(suspicion [n, k], flags [n, k]) of the k detectors."""
        susp, thr = self._suspicion(samples)
        return susp, susp >= thr

    def _suspicion(self, samples: Sequence[Sample]) -> tuple[np.ndarray, np.ndarray]:
        """(suspicion [n, k], per-sample thresholds [n, k]) of the k detectors."""
        susp = np.stack([d.detect(samples) for d in self.detectors], axis=1).reshape(len(samples), -1)
        thr = np.stack([d.thresholds(samples) for d in self.detectors], axis=1).reshape(len(samples), -1)
        return susp, thr

    def _score(self, samples: list[Sample]) -> np.ndarray:
        out, rejected = self._guarded(samples)
        if rejected.any():
            if not self._refuse:  # inside screened(): a placeholder it replaces with NaN
                return np.where(rejected, 0.0, out)
            i = int(np.flatnonzero(rejected)[0])
            names = self._details[(samples[i].id, samples[i].response)]["flagged"]
            raise GuardRejection(samples[i].id, "response",
                                 f"rejected by the guard around {self.metric.name}: flagged by {', '.join(names)}")
        return out

    def screened(self, samples: Sequence[Sample]) -> tuple[np.ndarray, np.ndarray]:
        """(scores, rejected): :meth:`score`, except that a sample the ``reject`` policy refuses is
        marked in ``rejected`` (its score NaN) instead of raising :class:`GuardRejection`. The
        same checks and fallbacks as :meth:`score` (it is :meth:`score`)."""
        samples = list(samples)
        self._refuse = False
        try:
            scores = np.asarray(self.score(samples), dtype=float)
        finally:
            self._refuse = True
        rejected = np.array([self.refused(s) for s in samples], dtype=bool)
        return np.where(rejected, np.nan, scores), rejected

    def pressure_of(self, samples: Sequence[Sample]) -> tuple[np.ndarray, np.ndarray]:
        """(pressure, flagged) of each sample as the guard saw it (after ``sanitize``), from the
        record of its last scoring; samples it has not scored are scored first."""
        samples = list(samples)
        missing = [s for s in samples if self.details(s) is None]
        if missing:
            self.screened(missing)
        rows = [self.details(s) or {} for s in samples]
        return (np.array([float(r.get("pressure", 0.0)) for r in rows]),
                np.array([bool(r.get("flagged")) for r in rows], dtype=bool))

    def refused(self, sample: Sample) -> bool:
        """Whether the last scoring of ``sample`` was refused by the ``reject`` policy."""
        found = self.details(sample)
        return bool(found and found.get("rejected"))

    def _guarded(self, samples: list[Sample]) -> tuple[np.ndarray, np.ndarray]:
        """Scores under the policy, and which samples ``reject`` refuses (their score NaN)."""
        screened = samples
        cleaned: list[Sanitized | None] = [None] * len(samples)
        if self.policy == "sanitize":
            cleaned = [sanitize(s.response) for s in samples]
            screened = [s.with_response(c.text) if c.changed else s for s, c in zip(samples, cleaned, strict=True)]
        blank = np.array([is_blank(s.response) for s in screened], dtype=bool)  # sanitized to nothing
        keep = [s for s, b in zip(screened, blank, strict=True) if not b]
        susp = np.ones((len(samples), len(self.detectors)))
        thr = np.ones_like(susp)
        raw = np.full(len(samples), np.nan)
        if self.policy == "reject":  # screen first: a refused sample is not scored
            if keep:
                susp[~blank], thr[~blank] = self._suspicion(keep)
            need = ~(susp >= thr).any(axis=1) & ~blank
            if need.any():
                raw[need] = self._metric_scores([s for s, n in zip(screened, need, strict=True) if n])
        elif keep:  # score, then screen; with prefetch the detectors' parses run in a helper meanwhile
            requests = [r for d in self.detectors for r in d.parse_requests(d.pending(keep))] if self.prefetch else []
            with parsing.prefetched(requests):
                raw[~blank] = self._metric_scores(keep)
            susp[~blank], thr[~blank] = self._suspicion(keep)
        flags = susp >= thr
        flagged_any = flags.any(axis=1)
        press = pressure(susp, thr)
        rejected = flagged_any if self.policy == "reject" else np.zeros(len(samples), dtype=bool)
        if blank.any():
            raw[blank] = 0.0
            self.fallbacks["sanitized_to_empty"] += int(blank.sum())
        if self.policy in ("floor", "sanitize"):
            out = np.where(flagged_any, 0.0, raw)
        elif self.policy == "penalize":
            out = raw * (1.0 - self.penalty) ** flags.sum(axis=1)
        else:
            out = raw.copy()
        self.scored += len(samples)
        for i, s in enumerate(samples):
            flagged = [d.name for d, f in zip(self.detectors, flags[i], strict=True) if f]
            self.flag_counts.update(flagged)
            if flagged:
                self.flag_counts["any"] += 1
            if rejected[i]:
                self.flag_counts["rejected"] += 1
            row: dict[str, Any] = {"raw_score": None if np.isnan(raw[i]) else float(raw[i]),
                                   "guarded_score": None if rejected[i] else float(out[i]),
                                   "flagged": flagged, "rejected": bool(rejected[i]),
                                   "pressure": round(float(press[i]), 6),
                                   "suspicion": {d.name: round(float(susp[i, k]), 6)
                                                 for k, d in enumerate(self.detectors)}}
            c = cleaned[i]
            if c is not None and c.changed:
                row["sanitized"] = {"text": c.text, "removed": c.removed}
                self.flag_counts["sanitized"] += 1
            self._remember(s, row)
        return out, rejected

    def _metric_scores(self, samples: list[Sample]) -> np.ndarray:
        return np.asarray(self.metric.score(samples), dtype=float)

    def _remember(self, s: Sample, row: dict[str, Any]) -> None:
        self._details[(s.id, s.response)] = row
        while len(self._details) > 200_000:
            self._details.popitem(last=False)

    def details(self, sample: Sample) -> dict[str, Any] | None:
        """Raw and guarded score, flags and suspicions of the last scoring of ``sample``."""
        return self._details.get((sample.id, sample.response))

    def compute_extras(self, samples: Sequence[Sample], scores: np.ndarray,
                       **options: Any) -> tuple[dict[str, Any], dict[str, list[Any]]]:
        """What ``compute`` adds behind a guard: how many items it flagged (``flagged``, and per
        detector ``flagged_by``) and, per item, the detectors that flagged it (``flags``) and
        the wrapped metric's score before the policy (``raw_scores``); under ``reject`` which
        items it refused, under ``sanitize`` the cleaned text of those it changed."""
        super().compute_extras(samples, scores, **options)  # no options: an unknown one is an error
        rows = [self.details(s) or {} for s in samples]
        flags = [list(r.get("flagged") or []) for r in rows]
        summary: dict[str, Any] = {"policy": self.policy, "flagged": sum(bool(f) for f in flags),
                                   "flagged_by": dict(sorted(Counter(n for f in flags for n in f).items()))}
        per_item: dict[str, list[Any]] = {"flags": flags, "raw_scores": [r.get("raw_score") for r in rows]}
        if self.policy == "reject":
            per_item["rejected"] = [bool(r.get("rejected")) for r in rows]
            summary["rejected_count"] = sum(per_item["rejected"])
        if self.policy == "sanitize":
            per_item["sanitized"] = [(r.get("sanitized") or {}).get("text") for r in rows]
        return summary, per_item

    def report(self) -> dict[str, Any]:
        """The wrapped metric's report; ``fallbacks`` adds the guard's own (blank responses
        floored before they reach the wrapped metric)."""
        inner = self.metric.report()
        fallbacks = Counter(inner.get("fallbacks") or {})
        fallbacks.update(self.fallbacks)
        return {**inner, "fallbacks": dict(fallbacks), "guard": {
            "policy": self.policy, "penalty": self.penalty, "thresholds_file": self.thresholds,
            "scored": self.scored, "flagged": dict(self.flag_counts),
            "detectors": [d.report() for d in self.detectors]}}


def _rebuild_guard(metric: Any, detectors: Sequence[Any], policy: str, penalty: float,
                   thresholds: str | None, prefetch: bool | None = None) -> GuardedMetric:
    from robusteval.execution.base import unship

    return GuardedMetric(unship(metric), [unship(d) for d in detectors], policy=policy, penalty=penalty,
                         thresholds=thresholds, prefetch=prefetch)
