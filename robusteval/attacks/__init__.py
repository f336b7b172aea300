"""Attacks on evaluators: ``load(name, **options)`` -> :class:`Attack`.

Families live one per module (``dialogue_rules``, ...); each attack cites its paper in its
docstring and ``source``.
"""

from __future__ import annotations

from typing import Any

from robusteval.attacks import (  # noqa: F401  (registration)
    adveval,
    aspect,
    baselines,
    closed_ended,
    dialogue_rules,
    search,
    universal,
)
from robusteval.attacks.base import Attack, AttackResult, Perturbation
from robusteval.attacks.registry import ATTACKS, register_attack

__all__ = ["ATTACKS", "Attack", "AttackResult", "Perturbation", "describe", "load", "names",
           "register_attack"]


def names() -> list[str]:
    return ATTACKS.names()


def load(name: str, **options: Any) -> Attack:
    return ATTACKS.get(name)(**options)


def describe(name: str) -> dict[str, Any]:
    return ATTACKS.get(name)().describe()
