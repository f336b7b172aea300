"""Attacks on evaluators: ``load(name, **options)`` -> :class:`Attack`.

Families live one per module (``dialogue_rules``, ...); each attack cites its paper in its
docstring and ``source``. Names may also be a plugin's entry point (group
``robusteval.attacks``) or ``module:Class`` naming an Attack subclass (docs/plugins.md).
"""

from __future__ import annotations

from typing import Any

from robusteval.attacks import (  # noqa: F401  (registration)
    adveval,
    aspect,
    baselines,
    closed_ended,
    dialogue_rules,
    judge,
    search,
    universal,
)
from robusteval.attacks.base import Attack, AttackResult, Perturbation
from robusteval.attacks.registry import ATTACKS, register_attack
from robusteval.errors import UnknownNameError

__all__ = ["ATTACKS", "Attack", "AttackResult", "Perturbation", "describe", "load", "names",
           "register_attack", "select"]


def names() -> list[str]:
    """Built-in attacks and installed plugins (a broken plugin is skipped with a warning)."""
    return ATTACKS.names()


def load(name: str | type[Attack], **options: Any) -> Attack:
    """Attack ``name`` (a registered name, a plugin's, ``module:Class``) or an Attack class."""
    if isinstance(name, type) and issubclass(name, Attack):
        return name(**options)
    from robusteval.registry import build

    return build(ATTACKS.get(name), options, f"attack {name!r}")


def describe(name: str) -> dict[str, Any]:
    """The attack's description plus ``origin`` (built-in, entry point or module:attr)."""
    return {**ATTACKS.get(name)().describe(), "origin": ATTACKS.info(name)["origin"]}


def select(spec: str | list[str], seed: int = 0, options: dict[str, dict[str, Any]] | None = None) -> list[Attack]:
    """Attacks named by ``spec`` (comma-separated string or list of names, ``family:<family>``
    or ``all``), built with ``seed``; ``options`` maps an attack name to its constructor options."""
    items = spec.split(",") if isinstance(spec, str) else list(spec)
    chosen: list[str] = []
    for item in (i.strip() for i in items if i.strip()):
        if item == "all":
            chosen += names()
        elif item.startswith("family:"):
            fam = item.split(":", 1)[1]
            found = [n for n in names() if ATTACKS.info(n)["family"] == fam]
            if not found:
                raise UnknownNameError(f"no attack of family {fam!r}")
            chosen += found
        else:
            ATTACKS.get(item)
            chosen.append(item)
    options = options or {}
    for name in options:
        ATTACKS.get(name)  # a typo in attack_options is an error, not a silent no-op
    return [load(n, **{"seed": seed, **(options.get(n) or {})}) for n in dict.fromkeys(chosen)]
