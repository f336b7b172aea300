"""Name -> factory registries filled by decorators (no eval, no import-time work)."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from robusteval.errors import UnknownNameError

T = TypeVar("T")


class Registry(Generic[T]):
    """A registry of factories keyed by name, with optional per-entry info."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._entries: dict[str, Callable[..., T]] = {}
        self._info: dict[str, dict[str, object]] = {}

    def register(self, name: str, **info: object) -> Callable[[Callable[..., T]], Callable[..., T]]:
        def decorator(factory: Callable[..., T]) -> Callable[..., T]:
            if name in self._entries:
                raise ValueError(f"{self.kind} {name!r} is registered twice")
            self._entries[name] = factory
            self._info[name] = {"name": name, **info}
            return factory

        return decorator

    def get(self, name: str) -> Callable[..., T]:
        try:
            return self._entries[name]
        except KeyError:
            close = difflib.get_close_matches(name, self._entries, n=3)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise UnknownNameError(
                f"unknown {self.kind} {name!r}{hint} (known: {', '.join(self.names())})"
            ) from None

    def info(self, name: str) -> dict[str, object]:
        self.get(name)
        return dict(self._info[name])

    def names(self) -> list[str]:
        return sorted(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())
