"""The attack registry: ``@register_attack`` on an Attack class (names come from the class)."""

from __future__ import annotations

from typing import Any

from robusteval.registry import Registry

ATTACKS: Registry[Any] = Registry("attack")


def register_attack(cls: type) -> type:
    """Register an Attack subclass under its ``name`` with its metadata."""
    ATTACKS.register(cls.name, family=cls.family, source=cls.source, direction=cls.direction)(cls)
    return cls
