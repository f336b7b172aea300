"""Certified bounds for median smoothing of a score (the derivation is in docs/smoothing.md).

Notation: ``f`` is the base metric, ``π_x`` the perturbation distribution of response ``x``,
``F_x`` the CDF of ``f(Z)``, ``Z ~ π_x``, and ``h_p(x) = inf{y : F_x(y) >= p}`` its
p-quantile. The smoothed score ``S_n(x)`` is the median of ``f`` over ``n`` seeded draws.

1. **Distance** (:func:`delta`). Units are drawn independently, so for ``x'`` differing from
   ``x`` in a set J of units, coupling unit by unit gives
   ``TV(π_x, π_x') <= 1 - prod_{j in J} (1 - d_j)`` with ``d_j`` the unit's worst-case
   distance; over every J with ``|J| <= k`` the k largest ``d_j`` give ``Δ_k``.
2. **Quantile shift** (Chiang et al. 2020, "Detection as Regression: Certified Object
   Detection by Median Smoothing", NeurIPS, Lemma 1, with the TV distance in place of the
   Gaussian bound): ``|F_x - F_x'| <= Δ`` everywhere, hence
   ``h_{p-Δ}(x) <= h_p(x') <= h_{p+Δ}(x)``.
3. **The observed median of x'** (:func:`median_band`): ``S_n(x')`` lies between the order
   statistics ``Y'_(r)`` and ``Y'_(s)`` (the two middle ones), and
   ``P(S_n(x') >= h_a(x')) >= BinomCDF(r-1; n, a)``, ``P(S_n(x') <= h_b(x')) >=
   1 - BinomCDF(s-1; n, b)``: with ``a`` and ``b = 1 - a`` chosen so that each fails with
   probability ``α/4``, ``S_n(x')`` is in ``[h_a(x'), h_b(x')]`` with probability ``>= 1 - α/2``.
4. **Order statistics of x's draws** (:func:`lower_order_bound`, :func:`upper_order_bound`):
   ``Y_(l) <= h_p(x)`` with probability ``>= P(Bin(n, p) >= l)``, ``Y_(u) >= h_p(x)`` with
   probability ``>= BinomCDF(u-1; n, p)``; each side is given ``α/4``.

Together (a union bound): for any ``x'`` within radius k that is chosen independently of the
seed, with probability ``>= 1 - α``, ``S_n(x') in [Y_(l), Y_(u)]`` with ``l`` for
``p = a - Δ_k`` and ``u`` for ``p = b + Δ_k``; a side whose quantile leaves (0, 1) falls back to
the score range (0 or 100). Step 3 is a separate event for each ``x'``: an attack that queries
many texts is covered text by text, not all at once. ``observed=False`` certifies the smoothed
*population* median ``h_1/2(x')`` instead (steps 2 and 4 only, ``α/2`` per side), which holds
for every ``x'`` within radius k simultaneously.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import stats

SCORE_MIN, SCORE_MAX = 0.0, 100.0


def delta(distances: Sequence[float], radius: int) -> float:
    """``Δ_k``: the total-variation bound for any ``radius`` changed units (step 1)."""
    if radius < 0:
        raise ValueError(f"radius must be >= 0, got {radius}")
    worst = sorted((min(max(float(d), 0.0), 1.0) for d in distances), reverse=True)[:radius]
    return float(1.0 - np.prod([1.0 - d for d in worst])) if worst else 0.0


def _middle(n: int) -> tuple[int, int]:
    """1-based ranks of the order statistics around numpy's median of n values."""
    return (n - 1) // 2 + 1, n // 2 + 1


def median_band(n: int, alpha: float) -> tuple[float, float]:
    """(a, b): the observed median of n draws lies in ``[h_a, h_b]`` of its own distribution
    with probability ``>= 1 - α/2`` (step 3; with few draws a and b sit far from 1/2, and the
    bounds of :func:`bounds` reach the ends of the score range)."""
    r, s = _middle(n)
    # the largest a with BinomCDF(r-1; n, a) >= 1 - α/4, i.e. BetaCDF(a; r, n-r+1) <= α/4
    a = float(stats.beta.ppf(alpha / 4, r, n - r + 1))
    # the smallest b with 1 - BinomCDF(s-1; n, b) >= 1 - α/4, i.e. BetaCDF(b; s, n-s+1) >= 1 - α/4
    b = float(stats.beta.ppf(1 - alpha / 4, s, n - s + 1)) if s <= n else 1.0
    return a, b


def lower_order_bound(values: np.ndarray, p: float, alpha: float) -> float:
    """``Y_(l) <= h_p`` with probability ``>= 1 - α`` (step 4), or the score minimum."""
    n = len(values)
    if p <= 0.0 or n == 0:
        return SCORE_MIN
    # the largest l with P(Bin(n, p) >= l) >= 1 - α  <=>  BinomCDF(l-1; n, p) <= α
    ks = np.arange(n + 1)
    ok = ks[stats.binom.cdf(ks - 1, n, p) <= alpha]
    l_rank = int(ok.max()) if len(ok) else 0
    return float(np.sort(values)[l_rank - 1]) if l_rank >= 1 else SCORE_MIN


def upper_order_bound(values: np.ndarray, p: float, alpha: float) -> float:
    """``Y_(u) >= h_p`` with probability ``>= 1 - α`` (step 4), or the score maximum."""
    n = len(values)
    if p >= 1.0 or n == 0:
        return SCORE_MAX
    # the smallest u with BinomCDF(u-1; n, p) >= 1 - α
    ks = np.arange(1, n + 1)
    ok = ks[stats.binom.cdf(ks - 1, n, p) >= 1 - alpha]
    return float(np.sort(values)[int(ok.min()) - 1]) if len(ok) else SCORE_MAX


def bounds(values: np.ndarray, distances: Sequence[float], radius: int, alpha: float,
           observed: bool = True) -> tuple[float, float]:
    """(lower, upper) for texts within ``radius`` changed units of the one whose draws scored
    ``values``: with ``observed``, they contain the observed smoothed score of any such text
    (chosen independently of the seed) with probability ``>= 1 - α``; without, the population
    median of every such text at once (module docstring)."""
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    d = delta(distances, radius)
    if not observed:
        return (lower_order_bound(values, 0.5 - d, alpha / 2), upper_order_bound(values, 0.5 + d, alpha / 2))
    a, b = median_band(len(values), alpha)
    return (lower_order_bound(values, a - d, alpha / 4), upper_order_bound(values, b + d, alpha / 4))
