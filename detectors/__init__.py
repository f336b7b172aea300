"""Input-sanitization detectors and the guard wrapper (installs as ``robusteval.detectors``).

    >>> from robusteval import detectors, metrics
    >>> guarded = detectors.guard(metrics.load("rougeL"), ["nonalnum", "speaker_tag"], policy="floor")

A metric may be a name, a Metric, or a plain function ``f(predictions, references=None,
sources=None) -> list[float]`` (:func:`robusteval.metrics.as_metric`). Detector names may be a
plugin's entry point (group ``robusteval.detectors``) or ``module:Class`` (docs/plugins.md).

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
    """A detector's registry entry and summary (``origin``: built-in, entry point or module:attr)."""
    _import_all()
    cls = DETECTORS.get(name)
    doc = (cls.__doc__ or "").strip().splitlines()
    return {**DETECTORS.info(name), "summary": doc[0] if doc else ""}


def load(name: str | type[Detector], thresholds: str | os.PathLike[str] | None = None,
         **options: Any) -> Detector:
    """Detector ``name`` (registered, a plugin's, ``module:Class``, or a Detector class) with
    ``options``; a calibrated threshold from ``thresholds`` if given."""
    from functools import partial

    from robusteval.execution import remember_factory
    from robusteval.registry import build

    _import_all()
    factory = name if isinstance(name, type) and issubclass(name, Detector) else DETECTORS.get(name)
    det: Detector = build(factory, options, f"detector {getattr(name, '__name__', name)!r}")
    if thresholds is not None:
        apply_thresholds(det, read_thresholds(thresholds), thresholds)
        thresholds = os.path.abspath(thresholds)
    # the recipe a Ray worker rebuilds it from (robusteval.execution), wherever it runs
    return remember_factory(det, partial(load, name, thresholds, **options))


def _thresholded(recipe: Any, thresholds: str) -> Detector:
    det = recipe.factory()  # a fresh detector: thresholds are applied to it in place
    apply_thresholds(det, read_thresholds(thresholds), thresholds)
    return det


def resolve(detectors: Sequence[Any], thresholds: str | os.PathLike[str] | None = None) -> list[Detector]:
    """Detector objects from names, ``{name, options}`` dicts or Detector objects."""
    from functools import partial

    from robusteval.execution import remember_factory
    from robusteval.execution.base import recipe_of

    table = read_thresholds(thresholds) if thresholds is not None else None
    out: list[Detector] = []
    for d in detectors:
        if isinstance(d, Detector):
            det = d
        elif isinstance(d, str) or (isinstance(d, type) and issubclass(d, Detector)):
            det = load(d)
        elif isinstance(d, dict) and "name" in d:
            det = load(d["name"], **(d.get("options") or {}))
        else:
            raise TypeError(f"a detector is a name, a {{name, options}} dict, a Detector or a Detector class, "
                            f"got {d!r}")
        if table is not None and thresholds is not None:
            apply_thresholds(det, table, thresholds)
            recipe = recipe_of(det)
            if recipe is not None:  # rebuilt on a worker with the same thresholds
                remember_factory(det, partial(_thresholded, recipe, os.path.abspath(thresholds)))
        out.append(det)
    return out


def guard(metric: Any, detectors: Sequence[Any], policy: str = "floor", penalty: float = 0.5,
          thresholds: str | os.PathLike[str] | None = None, prefetch: bool | None = None) -> Any:
    """Wrap ``metric`` (a Metric, a metric name or ``module:attr``, or a plain function
    ``f(predictions, references=None, sources=None) -> list[float]``) with ``detectors``;
    returns a Metric. ``prefetch``: parse the detectors' texts in a helper process while the
    metric scores (default: when the metric runs on a GPU or a server,
    :meth:`Metric.leaves_cpu_idle`); it changes the time, never a number."""
    from robusteval.detectors.guarded import GuardedMetric

    from robusteval.metrics.function import ensure_metric

    m = ensure_metric(metric)
    return GuardedMetric(m, resolve(detectors, thresholds), policy=policy, penalty=penalty, thresholds=thresholds,
                         prefetch=prefetch)
