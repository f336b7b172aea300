"""Victim metrics: ``load(spec, **options)`` -> :class:`Metric` with ``score(samples)``.

``spec`` is a registered name (``names()``), a plugin's entry-point name (group
``robusteval.metrics``), ``module:attr``, or a Python object: a Metric, a Metric class or a
plain function ``f(predictions, references=None, sources=None) -> list[float]``
(:func:`as_metric`; docs/plugins.md).

Modules register on import; importing them loads no model (models load in ``__init__`` of
the metric object, once, and are reused).
"""

from __future__ import annotations

from typing import Any

from robusteval.metrics import lexical  # noqa: F401  (registration)
from robusteval.metrics.base import Metric, PairMetric
from robusteval.metrics.function import FunctionMetric, as_metric
from robusteval.metrics.registry import METRICS, register_metric

__all__ = ["METRICS", "FunctionMetric", "Metric", "PairMetric", "as_metric", "info", "load", "names",
           "register_metric"]


def _import_all() -> None:
    # Heavy modules register lazily on first listing / lookup; their imports are local.
    from robusteval.metrics import (  # noqa: F401
        bertscore,
        committee,
        cross_encoder,
        dialogrpt,
        hf_classifier,
        llm_judge,
        pairwise,
        unieval,
    )


def names() -> list[str]:
    """Built-in metrics and installed plugins (a broken plugin is skipped with a warning)."""
    _import_all()
    return METRICS.names()


def info(name: str) -> dict[str, Any]:
    """A metric's registry entry (``origin``: built-in, the entry point, or module:attr); for a
    plugin or ``module:attr`` this imports it, so an unknown or broken one fails here."""
    _import_all()
    return METRICS.info(name)


def load(spec: Any, **options: Any) -> Metric:
    """The metric ``spec`` names or is (see the module docstring), built with ``options``. A
    metric loaded by name remembers the recipe (:func:`robusteval.execution.remember_factory`),
    so a Ray worker builds its own copy instead of receiving this one; ``device="auto"`` means
    cuda where the metric is built when there is a GPU, else mps on Apple silicon, else cpu."""
    if not isinstance(spec, str):
        return as_metric(spec, **options)
    _import_all()
    from functools import partial

    from robusteval.execution import remember_factory
    from robusteval.metrics.base import resolve_device
    from robusteval.registry import build

    # "auto" is resolved where the metric is built: a GPU worker's recipe says "auto" too
    built = {**options, "device": resolve_device(options["device"])} if "device" in options else options
    return remember_factory(build(METRICS.get(spec), built, f"metric {spec!r}"), partial(load, spec, **options))


from robusteval.metrics.base import as_reward_fn as as_reward_fn  # noqa: E402  (the TRL reward function)
