"""Input-sanitization detectors and the guard wrapper (installs as ``robusteval.detectors``).

    >>> from robusteval import detectors, metrics
    >>> guarded = detectors.guard(metrics.load("rougeL"), ["nonalnum", "speaker_tag"], policy="floor")

``load(name, thresholds=None, **options)`` builds a detector; ``thresholds`` is a file written
by ``robusteval guard calibrate`` whose calibrated threshold replaces the default. Modules
register on import and load no model at import time (the perplexity LM loads when the
detector is built).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from robusteval.detectors.base import DETECTORS, Detector, apply_thresholds, read_thresholds, register_detector

__all__ = ["DETECTORS", "Detector", "guard", "info", "load", "names", "register_detector"]


def _import_all() -> None:
    from robusteval.detectors import (  # noqa: F401  (registration)
        committee,
        context_copy,
        gec,
        generic,
        joint,
        judge_injection,
        nonalnum,
        parse_triple,
        perplexity,
        source_support,
        speaker_tag,
    )


def names() -> list[str]:
    """The detectors a guard can use by name alone (``joint`` needs a fitted model and is
    loaded as ``load("joint", model=...)``)."""
    _import_all()
    return [n for n in DETECTORS.names() if getattr(DETECTORS.get(n), "listed", True)]


def info(name: str) -> dict[str, Any]:
    _import_all()
    cls = DETECTORS.get(name)
    doc = (cls.__doc__ or "").strip().splitlines()
    return {**DETECTORS.info(name), "summary": doc[0] if doc else ""}


def load(name: str, thresholds: str | os.PathLike[str] | None = None, **options: Any) -> Detector:
    """Detector ``name`` with ``options``; a calibrated threshold from ``thresholds`` if given."""
    _import_all()
    det: Detector = DETECTORS.get(name)(**options)
    if thresholds is not None:
        apply_thresholds(det, read_thresholds(thresholds), thresholds)
    return det


def resolve(detectors: Sequence[Any], thresholds: str | os.PathLike[str] | None = None) -> list[Detector]:
    """Detector objects from names, ``{name, options}`` dicts or Detector objects."""
    table = read_thresholds(thresholds) if thresholds is not None else None
    out: list[Detector] = []
    for d in detectors:
        if isinstance(d, Detector):
            det = d
        elif isinstance(d, str):
            det = load(d)
        elif isinstance(d, dict) and "name" in d:
            det = load(d["name"], **(d.get("options") or {}))
        else:
            raise TypeError(f"a detector is a name, a {{name, options}} dict or a Detector, got {d!r}")
        if table is not None and thresholds is not None:
            apply_thresholds(det, table, thresholds)
        out.append(det)
    return out


def guard(metric: Any, detectors: Sequence[Any], policy: str = "floor", penalty: float = 0.5,
          thresholds: str | os.PathLike[str] | None = None) -> Any:
    """Wrap ``metric`` (a Metric or a metric name) with ``detectors``; returns a Metric."""
    from robusteval.detectors.guarded import GuardedMetric

    from robusteval import metrics

    m = metrics.load(metric) if isinstance(metric, str) else metric
    return GuardedMetric(m, resolve(detectors, thresholds), policy=policy, penalty=penalty, thresholds=thresholds)
