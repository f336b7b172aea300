"""Meta-evaluation: how well a metric's scores agree with human judgments.

Turn-level (item-level) Spearman, Kendall tau-b and Pearson with percentile bootstrap
confidence intervals (items resampled with replacement), and system-level correlations
(scores averaged per ``meta["system_id"]``) where a dataset has systems.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from robusteval.types import Sample

METHODS = ("spearman", "kendall", "pearson")


def correlation(x: np.ndarray, y: np.ndarray, method: str) -> float | None:
    """Correlation, or None when undefined (fewer than 3 items or a constant side)."""
    from scipy import stats

    x, y = np.asarray(x, float), np.asarray(y, float)
    if len(x) < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return None
    if method == "spearman":
        r = stats.spearmanr(x, y).statistic
    elif method == "kendall":
        r = stats.kendalltau(x, y).statistic
    elif method == "pearson":
        r = stats.pearsonr(x, y).statistic
    else:
        raise ValueError(f"method must be one of {METHODS}")
    return None if r is None or math.isnan(r) else float(r)


def bootstrap_ci(x: np.ndarray, y: np.ndarray, method: str, n_boot: int = 1000, seed: int = 0,
                 alpha: float = 0.05, clusters: Sequence[Any] | None = None) -> tuple[float, float] | None:
    """Percentile bootstrap interval of a correlation (:func:`correlation_draws` on one plan,
    :func:`percentile_interval` of them, unrounded). With ``clusters`` (the conversation of
    each rated response, :meth:`Sample.conversation_key`) whole conversations are resampled,
    since responses to one context, or to turns of one dialogue, are not independent
    (:func:`robusteval.stats.cluster_bootstrap_indices`). None unless at least half the draws
    (and 10) are defined: a correlation undefined on most resamples has no interval."""
    from robusteval.stats import cluster_bootstrap_indices

    plan = cluster_bootstrap_indices(clusters if clusters is not None else range(len(x)), n_boot, seed)
    # every pair as given: the callers drop non-finite pairs before (correlate does)
    draws = correlation_draws(x, y, plan, method, drop_nonfinite=False)
    ci = percentile_interval(draws, None, alpha, min_draws=max(10, n_boot // 2))
    return None if ci is None else (ci[0], ci[1])


def correlation_draws(x: np.ndarray, y: np.ndarray, plan: Sequence[np.ndarray],
                      method: str = "spearman", drop_nonfinite: bool = True) -> list[float]:
    """The correlation of ``x`` with ``y`` on each resample of ``plan`` (row indices, e.g.
    :func:`robusteval.stats.cluster_bootstrap_indices`), NaN where it is undefined. Pairs
    with a non-finite ``x`` are left out of each draw (``drop_nonfinite``), as
    :func:`correlation` of the whole set leaves them out. Two metrics' draws on one plan pair
    up: their difference per draw is the paired bootstrap of a correlation change
    (:func:`correlation_change`)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    out = []
    for pick in plan:
        ok = np.isfinite(x[pick]) if drop_nonfinite else np.ones(len(pick), dtype=bool)
        r = correlation(x[pick][ok], y[pick][ok], method)
        out.append(np.nan if r is None else r)
    return out


def percentile_interval(draws: Sequence[float], digits: int | None = 6, alpha: float = 0.05,
                        min_draws: int = 10) -> list[float] | None:
    """The percentile interval of bootstrap ``draws`` (NaN draws left out), rounded to
    ``digits`` (None: unrounded), or None with fewer than ``min_draws`` defined draws."""
    vals = [float(v) for v in draws if np.isfinite(v)]
    if len(vals) < min_draws:
        return None
    ends = [float(np.quantile(vals, alpha / 2)), float(np.quantile(vals, 1 - alpha / 2))]
    return ends if digits is None else [round(e, digits) for e in ends]


def correlation_change(before: np.ndarray, after: np.ndarray, human: np.ndarray,
                       clusters: Sequence[Any] | None = None, n_boot: int = 1000, seed: int = 0,
                       method: str = "spearman", digits: int = 6) -> dict[str, Any]:
    """How much a metric's correlation with people changes from ``before`` to ``after`` (two
    metrics, or one metric plain and defended, scoring the *same* rated items), with a *paired*
    95 % interval: one resampling plan (whole ``clusters`` -- conversations -- drawn with
    replacement) is applied to both sides, and the interval is the percentile interval of the
    per-draw difference. Two separate intervals would ignore that both sides share the items'
    difficulty: an overlap of them says little about the change.

    Returns ``{"before", "after", "change", "ci", "ci_method", "n", "n_contexts", "n_boot"}``;
    ``change`` is after - before (negative: ``after`` agrees less with people) and is None when
    either correlation is undefined. Items where either side is not finite are left out of
    both, so both correlate the same items (``n``). (``compare``'s validity differs on purpose:
    there each variant correlates the items it scored, so a refusing guard's unscored items
    leave its side only, and what it refused is counted as the flagged share.)
    """
    from robusteval.stats import cluster_bootstrap_indices

    b, a, h = (np.asarray(v, float) for v in (before, after, human))
    if not len(b) == len(a) == len(h):
        raise ValueError(f"correlation_change: {len(b)} before, {len(a)} after and {len(h)} human values")
    labels = list(clusters) if clusters is not None else list(range(len(h)))
    if len(labels) != len(h):
        raise ValueError(f"correlation_change: {len(labels)} cluster labels for {len(h)} items")
    ok = np.isfinite(b) & np.isfinite(a) & np.isfinite(h)
    b, a, h = b[ok], a[ok], h[ok]
    labels = [c for c, k in zip(labels, ok, strict=True) if k]
    rb, ra = correlation(b, h, method), correlation(a, h, method)
    out: dict[str, Any] = {"before": None if rb is None else round(rb, digits),
                           "after": None if ra is None else round(ra, digits),
                           "change": None if rb is None or ra is None else round(ra - rb, digits),
                           "ci": None, "ci_method": "paired cluster-bootstrap" if len(set(labels)) < len(labels)
                           else "paired bootstrap", "n": len(h), "n_contexts": len(set(labels)),
                           "n_boot": n_boot}
    if out["change"] is not None and n_boot and len(set(labels)) >= 2:
        plan = cluster_bootstrap_indices(labels, n_boot, seed)
        diffs = np.array(correlation_draws(a, h, plan, method)) - np.array(correlation_draws(b, h, plan, method))
        out["ci"] = percentile_interval(diffs.tolist(), digits)
    return out


def metaevaluate_change(samples: Sequence[Sample], before: np.ndarray, after: np.ndarray, aspect: str,
                        n_boot: int = 1000, seed: int = 0, method: str = "spearman") -> dict[str, Any]:
    """:func:`correlation_change` on the samples rated for ``aspect``, clustered by conversation
    (:meth:`Sample.conversation_key`), as :func:`metaevaluate` clusters each side's interval."""
    before, after = np.asarray(before, float), np.asarray(after, float)
    if not len(before) == len(after) == len(samples):
        raise ValueError(f"metaevaluate_change: {len(samples)} samples, {len(before)} before and "
                         f"{len(after)} after scores")
    idx = [i for i, s in enumerate(samples) if aspect in s.human]
    human = np.array([samples[i].human[aspect] for i in idx], dtype=float)
    return correlation_change(before[idx], after[idx], human, [samples[i].conversation_key() for i in idx],
                              n_boot, seed, method)


def fmt_change(entry: Mapping[str, Any] | None) -> str:
    """``"-0.012 [-0.031, +0.006]"`` for a :func:`correlation_change` entry, or ``"n/a"``: the
    interval to three decimals like the change, so an end that decides a verdict (below -0.02
    or not) is never rounded onto the bound."""
    if not entry or entry.get("change") is None:
        return "n/a"
    ci = entry.get("ci")
    return f"{entry['change']:+.3f}" + (f" [{ci[0]:+.3f}, {ci[1]:+.3f}]" if ci else "")


def correlate(scores: np.ndarray, human: np.ndarray, n_boot: int = 1000, seed: int = 0,
              methods: Sequence[str] = METHODS, clusters: Sequence[Any] | None = None) -> dict[str, Any]:
    """Correlations with 95 % bootstrap intervals; pairs with a non-finite value are dropped
    (and counted in ``dropped_nonfinite``), so ``n`` is the number of pairs correlated."""
    scores, human = np.asarray(scores, float), np.asarray(human, float)
    ok = np.isfinite(scores) & np.isfinite(human)
    shared = clusters is not None and len(set(clusters)) < len(clusters)
    kept = [c for c, k in zip(clusters, ok, strict=True) if k] if shared and clusters is not None else None
    scores, human = scores[ok], human[ok]
    out: dict[str, Any] = {"n": len(scores), "dropped_nonfinite": int((~ok).sum()),
                           "ci_method": "context-bootstrap" if shared else "bootstrap"}
    if shared and kept is not None:
        out["n_contexts"] = len(set(kept))
    for m in methods:
        out[m] = {"r": correlation(scores, human, m),
                  "ci95": bootstrap_ci(scores, human, m, n_boot, seed, clusters=kept) if n_boot else None}
    return out


def system_level(samples: Sequence[Sample], scores: np.ndarray, aspect: str) -> dict[str, Any] | None:
    """Correlations of the systems' mean scores with their mean human ratings. Items with a
    non-finite score (a text a ``reject`` guard refused) leave both means of their system, as
    they leave the item-level correlation, and are counted in ``dropped_nonfinite``; one such
    item once made every system-level correlation n/a."""
    by_sys: dict[str, list[int]] = {}
    dropped = 0
    for i, s in enumerate(samples):
        sid = s.meta.get("system_id")
        if sid is not None and aspect in s.human:
            if not np.isfinite(scores[i]):
                dropped += 1
                continue
            by_sys.setdefault(str(sid), []).append(i)
    if len(by_sys) < 3:
        return None
    names = sorted(by_sys)
    ms = np.array([scores[by_sys[k]].mean() for k in names])
    hs = np.array([np.mean([samples[i].human[aspect] for i in by_sys[k]]) for k in names])
    return {"n_systems": len(names), "dropped_nonfinite": dropped, **{m: correlation(ms, hs, m) for m in METHODS}}


def metaevaluate(samples: Sequence[Sample], scores: np.ndarray, aspects: Sequence[str] | None = None,
                 n_boot: int = 1000, seed: int = 0, system: bool = False) -> dict[str, Any]:
    """Correlations of ``scores`` with every (or the given) human aspect of ``samples``."""
    scores = np.asarray(scores, float)
    if aspects is None:
        aspects = list(dict.fromkeys(a for s in samples for a in s.human))
    result: dict[str, Any] = {}
    for aspect in aspects:
        idx = [i for i, s in enumerate(samples) if aspect in s.human]
        if not idx:
            result[aspect] = {"n": 0, "note": "no sample has this aspect"}
            continue
        h = np.array([samples[i].human[aspect] for i in idx], dtype=float)
        entry = correlate(scores[idx], h, n_boot, seed, clusters=[samples[i].conversation_key() for i in idx])
        entry["unrated"] = len(samples) - len(idx)  # samples without this rating: not correlated
        if system:
            entry["system"] = system_level([samples[i] for i in idx], scores[idx], aspect)
        result[aspect] = entry
    return result


def fmt_r(entry: Mapping[str, Any] | None, method: str = "spearman", ci: bool = True) -> str:
    if not entry or entry.get(method) is None:
        return "n/a"
    e = entry[method]
    r = e["r"] if isinstance(e, Mapping) else e
    if r is None:
        return "n/a"
    if ci and isinstance(e, Mapping) and e.get("ci95"):
        lo, hi = e["ci95"]
        return f"{r:.3f} [{lo:.2f}, {hi:.2f}]"
    return f"{r:.3f}"
