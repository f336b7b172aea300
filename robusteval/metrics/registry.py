"""The metric registry: ``@register_metric(name, **info)`` on a Metric class."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from robusteval.registry import Registry

METRICS: Registry[Any] = Registry("metric")


def register_metric(name: str, **info: Any) -> Callable[[type], type]:
    def decorator(cls: type) -> type:
        METRICS.register(name, **info)(cls)
        return cls

    return decorator
