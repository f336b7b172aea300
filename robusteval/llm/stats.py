"""Counters every backend keeps, and the helpers callers use to pass sample ids down."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

REPORT_KEYS = ("calls", "cache_hits", "retries", "failures", "fallbacks", "not_cached",
               "cache_discarded", "waited_s", "last_error")


@dataclass
class CallStats:
    """What a backend did since it was built.

    ``calls``: requests sent (HTTP tries, or model forward passes), retries included;
    ``cache_hits``: answers served from the cache (not calls); ``retries``: tries after the
    first; ``failures``: requests that ended with no usable answer; ``fallbacks``: failures
    the caller asked to get a placeholder for (``on_error="fallback"``) instead of an error;
    ``not_cached``: answers returned but not cached because the caller rejected them (e.g.
    no parseable score); ``cache_discarded``: cached entries ignored as not usable;
    ``waited_s``: seconds slept between tries; ``last_error``: the latest failure's message.
    """

    calls: int = 0
    cache_hits: int = 0
    retries: int = 0
    failures: int = 0
    fallbacks: int = 0
    not_cached: int = 0
    cache_discarded: int = 0
    waited_s: float = 0.0
    last_error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["waited_s"] = round(self.waited_s, 3)
        return out


def backend_report(backend: Any) -> dict[str, Any]:
    """``backend.report()``, or what can be read off a backend without one."""
    if callable(getattr(backend, "report", None)):
        return dict(backend.report())
    out: dict[str, Any] = {"backend": getattr(backend, "name", type(backend).__name__)}
    for key in ("calls", "cache_hits"):
        if hasattr(backend, key):
            out[key] = getattr(backend, key)
    return out


def call_with(method: Callable[..., Any], *args: Any, optional: dict[str, Any] | None = None,
              **kwargs: Any) -> Any:
    """``method(*args, **kwargs)`` plus those ``optional`` keywords it accepts.

    The judge passes ``ids``/``accept``/``on_error`` this way, so a minimal backend written
    against ``generate(prompts, n, temperature, max_new_tokens, seed)`` keeps working."""
    extra = dict(optional or {})
    try:
        params = inspect.signature(method).parameters
    except (TypeError, ValueError):
        params = {}
    if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        extra = {k: v for k, v in extra.items() if k in params}
    return method(*args, **kwargs, **extra)
