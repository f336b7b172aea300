"""Sample selections used by attack configs."""

from __future__ import annotations

from collections.abc import Sequence

from robusteval.types import Sample

SELECTIONS = ("all", "best-per-context")


def select(samples: Sequence[Sample], mode: str = "all", aspect: str | None = None) -> list[Sample]:
    """``all``, or ``best-per-context``: per distinct context, the response with the highest
    human score on ``aspect`` (default: the first aspect), first one on ties, in context order."""
    if mode == "all":
        return list(samples)
    if mode != "best-per-context":
        raise ValueError(f"selection must be one of {SELECTIONS}, got {mode!r}")
    best: dict[tuple[str, ...], Sample] = {}
    for s in samples:
        key = aspect or next(iter(s.human), None)
        if key is None or key not in s.human:
            continue
        cur = best.get(s.context)
        if cur is None or s.human[key] > cur.human[key]:
            best[s.context] = s
    return list(best.values())
