"""Attack success per family: every criterion, plus the *primary* one used in headline tables.

The primary criterion depends on the direction: an R- text (made bad) fools the victim when
it scores at least as high as the reference (Vasselli & Watanabe's beats-reference test); an
R+ text (quality kept) fools it when its score moves by more than the tolerance (the
invariance test of Hu et al. 2024). Rows of fitting samples (a universal trigger's own
training samples) are left out, as in :func:`robusteval.attacks.runner.summarize`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from robusteval.attacks.runner import CRITERIA

PRIMARY = {"R-": "beats_reference", "R+": "expectation"}


def family_key(row: dict[str, Any]) -> str:
    return f"{row['family']} ({row['direction']})"


def counted(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Applicable rows that count towards ASR (no fitting samples)."""
    return [r for r in rows if r.get("applicable") and not (r.get("meta") or {}).get("fitting_sample")]


def rate(verdicts: list[bool]) -> dict[str, Any]:
    n = len(verdicts)
    k = int(sum(verdicts))
    return {"successes": k, "n": n, "asr": round(k / n, 6) if n else None}


def asr_table(rows: Iterable[dict[str, Any]], key: Any = family_key) -> dict[str, dict[str, Any]]:
    """``key(row)`` -> {direction, applicable, primary: {successes, n, asr}, criteria: {...}}."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in counted(rows):
        groups.setdefault(key(r), []).append(r)
    out: dict[str, dict[str, Any]] = {}
    for name in sorted(groups):
        group = groups[name]
        crit = {c: rate([bool(g["success"][c]) for g in group if (g.get("success") or {}).get(c) is not None])
                for c in CRITERIA}
        primary = rate([bool(g["success"][PRIMARY[g["direction"]]]) for g in group
                        if (g.get("success") or {}).get(PRIMARY[g["direction"]]) is not None])
        out[name] = {"direction": group[0]["direction"], "applicable": len(group), "primary": primary,
                     "criteria": crit}
    return out


def overall(rows: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Primary ASR over every counted row."""
    return rate([bool(r["success"][PRIMARY[r["direction"]]]) for r in counted(rows)
                 if (r.get("success") or {}).get(PRIMARY[r["direction"]]) is not None])
