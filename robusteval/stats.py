"""Every rate robusteval prints, with its uncertainty, computed here and nowhere else.

* :func:`proportion` — k successes out of n with a 95 % interval: Wilson's score interval
  when every trial is independent, a percentile bootstrap over *clusters* (resampling whole
  contexts) when several trials share one, since rows of the same context are not independent.
  Attack success rates (:mod:`robusteval.asr`), false-positive and detection rates
  (:func:`flag_rate`), the guard's flagged share and judges' flip rates (:func:`flip_rate`)
  all go through it.
* :func:`mean_ci` — a mean (e.g. the paired score drop an attack causes, Hu et al.'s Table 21
  statistic) with a percentile bootstrap interval over clusters.
* :func:`sign_test` — an exact sign test of paired differences over clusters, the check a
  bootstrap over few clusters needs (a paired ASR change, :func:`robusteval.asr.paired_change`).
* :func:`auc` / :func:`auc_ci` — a detector's ROC AUC (clean vs attacked text) with a
  two-sample bootstrap interval over each side's clusters.
* :func:`cluster_bootstrap_indices` — the resampling plan shared by the proportion bootstrap,
  the mean bootstrap and the correlation bootstrap of :mod:`robusteval.metaeval`.
* :func:`binomial_upper` — a one-sided Clopper-Pearson upper bound on a rate, what a
  threshold calibrated with a ``confidence`` (:func:`robusteval.detectors.calibrate.threshold_for`)
  holds its calibration FPR under.

Wilson (1927) is used rather than the normal ("Wald") interval because it stays inside [0, 1]
and keeps close to its nominal coverage at the small n (8-30 per family) of our tables.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Sequence
from typing import Any

import numpy as np

Z95 = 1.959963984540054  # the standard normal's 97.5th percentile


def wilson(k: float, n: float, z: float = Z95) -> tuple[float, float] | None:
    """Wilson score interval of k successes in n trials (None when n == 0); ``k`` and ``n`` may
    be effective (non-integer) counts."""
    if n <= 0:
        return None
    if not 0 <= k <= n:
        raise ValueError(f"need 0 <= k <= n, got k={k}, n={n}")
    p = k / n
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def binomial_upper(k: int, n: int, confidence: float) -> float:
    """One-sided Clopper-Pearson upper bound on a rate seen as ``k`` of ``n``: the largest p
    with P(Binomial(n, p) <= k) >= 1 - confidence, i.e. the ``confidence`` quantile of
    Beta(k + 1, n - k) (1.0 when k == n or n == 0). For k == 0 it is 1 - (1 - confidence)^(1/n)."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if not 0 <= k <= n:
        raise ValueError(f"need 0 <= k <= n, got k={k}, n={n}")
    if n == 0 or k == n:
        return 1.0
    from scipy.stats import beta

    return float(beta.ppf(confidence, k + 1, n - k))


def sorted_labels(labels: Iterable[Hashable]) -> list[Hashable]:
    """The distinct ``labels`` in sorted order (labels of mixed types by type name, then repr):
    an order that does not depend on the order the rows came in, for numbering clusters."""
    distinct = set(labels)
    try:
        return sorted(distinct)  # type: ignore[type-var]
    except TypeError:  # labels of mixed types
        return sorted(distinct, key=lambda c: (type(c).__name__, repr(c)))


def cluster_bootstrap_indices(clusters: Sequence[Hashable], n_boot: int, seed: int) -> list[np.ndarray]:
    """``n_boot`` resamples of row indices drawn by whole cluster (with replacement). The
    clusters are numbered in sorted order of their labels, not in order of appearance, so the
    same rows in another order (a log written as Ray workers finished) resample alike and give
    the same interval."""
    groups: dict[Hashable, list[int]] = {}
    for i, c in enumerate(clusters):
        groups.setdefault(c, []).append(i)
    members = [np.asarray(groups[c], dtype=int) for c in sorted_labels(groups)]  # positions in their own order
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n_boot):
        pick = rng.integers(0, len(members), size=len(members))
        out.append(np.concatenate([members[j] for j in pick]))
    return out


def proportion(verdicts: Sequence[bool], clusters: Sequence[Hashable] | None = None, n_boot: int = 1000,
               seed: int = 0, digits: int = 6, names: tuple[str, str] = ("k", "rate")) -> dict[str, Any]:
    """``{k, "n", rate, "ci": [lo, hi], "ci_method"}`` for a list of verdicts, the count and
    rate keys named by ``names`` (ASR tables say ``successes``/``asr``, FPR tables
    ``flagged``/``rate``).

    With ``clusters`` (e.g. the context id of each row) and more than one row in some
    cluster, the interval is a cluster bootstrap, widened where needed to contain Wilson's
    interval at the number of clusters (a bootstrap alone collapses to a point when every
    verdict agrees -- 0/40 is not "0 % [0, 0]" -- and is too narrow with few clusters);
    otherwise it is Wilson's. ``rate`` and ``ci`` are None when n == 0: an empty denominator
    is never printed as 0 %.
    """
    v = np.asarray([bool(x) for x in verdicts], dtype=bool)
    n, k = len(v), int(v.sum())
    kk, rk = names
    if n == 0:
        return {kk: 0, "n": 0, rk: None, "ci": None, "ci_method": None}
    method = "wilson"
    ci = wilson(k, n)
    if clusters is not None:
        if len(clusters) != n:
            raise ValueError(f"{len(clusters)} cluster labels for {n} verdicts")
        if len(set(clusters)) < n:
            method = "cluster-bootstrap"
            draws = [float(v[idx].mean()) for idx in cluster_bootstrap_indices(clusters, n_boot, seed)]
            n_c = len(set(clusters))
            floor = wilson(k / n * n_c, n_c)
            assert floor is not None
            ci = (min(float(np.percentile(draws, 2.5)), floor[0]), max(float(np.percentile(draws, 97.5)), floor[1]))
    assert ci is not None
    return {kk: k, "n": n, rk: round(k / n, digits), "ci": [round(ci[0], digits), round(ci[1], digits)],
            "ci_method": method}


def mean_ci(values: Sequence[float], clusters: Sequence[Hashable] | None = None, n_boot: int = 1000,
            seed: int = 0, digits: int = 6) -> dict[str, Any]:
    """``{mean, n, ci, ci_method}``: the mean of ``values`` and its 95 % percentile bootstrap
    interval, resampling whole ``clusters`` (default: every value its own). ``mean`` and ``ci``
    are None when n == 0, and ``ci`` is None for a single value (no spread to resample)."""
    v = np.asarray([float(x) for x in values], dtype=float)
    n = len(v)
    if n == 0:
        return {"mean": None, "n": 0, "ci": None, "ci_method": None}
    if not np.all(np.isfinite(v)):
        raise ValueError("mean_ci: every value must be a finite number")
    labels = list(clusters) if clusters is not None else list(range(n))
    if len(labels) != n:
        raise ValueError(f"{len(labels)} cluster labels for {n} values")
    if len(set(labels)) < 2:
        return {"mean": round(float(v.mean()), digits), "n": n, "ci": None, "ci_method": None}
    draws = [float(v[idx].mean()) for idx in cluster_bootstrap_indices(labels, n_boot, seed)]
    return {"mean": round(float(v.mean()), digits), "n": n,
            "ci": [round(float(np.percentile(draws, 2.5)), digits), round(float(np.percentile(draws, 97.5)), digits)],
            "ci_method": "cluster-bootstrap" if len(set(labels)) < n else "bootstrap"}


def sign_test(values: Sequence[float], clusters: Sequence[Hashable] | None = None) -> dict[str, Any]:
    """An exact two-sided sign test that paired differences centre on 0, over *clusters*: each
    cluster's differences are summed, and the clusters that moved down (sum < 0) are compared
    with those that moved up (> 0) by a binomial test at p = 1/2 (``scipy.stats.binomtest``);
    clusters whose sum is 0 carry no sign and are left out (``tied``).

    It answers what a percentile bootstrap over few clusters answers too readily: with 17
    contexts, 4 down and none up, the bootstrap's interval of the mean change excludes 0,
    while the exact p is 2 * 0.5**4 = 0.125. ``{"down", "up", "tied", "p"}``; ``p`` is None
    when no cluster moved."""
    from scipy.stats import binomtest

    labels = list(clusters) if clusters is not None else list(range(len(values)))
    if len(labels) != len(values):
        raise ValueError(f"{len(labels)} cluster labels for {len(values)} values")
    sums: dict[Hashable, float] = {}
    for c, v in zip(labels, values, strict=True):
        sums[c] = sums.get(c, 0.0) + float(v)
    down, up = sum(v < 0 for v in sums.values()), sum(v > 0 for v in sums.values())
    p = None if down + up == 0 else float(binomtest(down, down + up, 0.5).pvalue)
    return {"down": down, "up": up, "tied": len(sums) - down - up, "p": p}


def auc(negatives: Sequence[float] | np.ndarray, positives: Sequence[float] | np.ndarray) -> float | None:
    """The area under the ROC curve of a score that should rank ``positives`` (attacked text)
    above ``negatives`` (clean text): the probability that a random positive scores above a
    random negative, ties counting half (the Mann-Whitney U statistic over n_pos * n_neg, from
    mid-ranks: ``scipy.stats.rankdata``). None when either side is empty."""
    from scipy.stats import rankdata

    neg, pos = np.asarray(negatives, float), np.asarray(positives, float)
    if not (np.all(np.isfinite(neg)) and np.all(np.isfinite(pos))):
        raise ValueError("auc: every score must be a finite number (a detector's suspicion is in [0, 1])")
    if not len(neg) or not len(pos):
        return None
    ranks = rankdata(np.concatenate([pos, neg]))
    u = float(ranks[: len(pos)].sum()) - len(pos) * (len(pos) + 1) / 2
    return u / (len(pos) * len(neg))


def auc_ci(negatives: Sequence[float] | np.ndarray, positives: Sequence[float] | np.ndarray,
           negative_clusters: Sequence[Hashable] | None = None, positive_clusters: Sequence[Hashable] | None = None,
           n_boot: int = 1000, seed: int = 0, digits: int = 6) -> dict[str, Any]:
    """:func:`auc` with a 95 % percentile bootstrap interval that resamples each side apart
    (the clean texts and the attacked texts are two samples) and, within a side, whole clusters
    (the references of one document, the attacked rows of one context).
    ``{"auc", "ci", "ci_method", "n_clean", "n_adversarial"}``; ``ci`` is None when a side has
    fewer than two clusters."""
    neg, pos = np.asarray(negatives, float), np.asarray(positives, float)
    nk = list(negative_clusters) if negative_clusters is not None else list(range(len(neg)))
    pk = list(positive_clusters) if positive_clusters is not None else list(range(len(pos)))
    if len(nk) != len(neg) or len(pk) != len(pos):
        raise ValueError(f"auc_ci: {len(nk)} clean cluster labels for {len(neg)} texts, "
                         f"{len(pk)} adversarial for {len(pos)}")
    point = auc(neg, pos)
    out: dict[str, Any] = {"auc": None if point is None else round(point, digits), "ci": None, "ci_method": None,
                           "n_clean": len(neg), "n_adversarial": len(pos)}
    if point is None or not n_boot or len(set(nk)) < 2 or len(set(pk)) < 2:
        return out
    shared = len(set(nk)) < len(nk) or len(set(pk)) < len(pk)
    draws = [auc(neg[i], pos[j]) for i, j in zip(cluster_bootstrap_indices(nk, n_boot, seed),
                                                 cluster_bootstrap_indices(pk, n_boot, seed + 1), strict=True)]
    vals = np.array(draws, dtype=float)
    out["ci"] = [round(float(np.percentile(vals, 2.5)), digits), round(float(np.percentile(vals, 97.5)), digits)]
    out["ci_method"] = "two-sample cluster-bootstrap" if shared else "two-sample bootstrap"
    return out


def scoped(scope: str | None, key: str) -> str:
    """A cluster key within its set or dataset: rows pooled over several sets never share a
    cluster because two sets happen to use the same conversation key ("Hello", id "1"). The one
    spelling of that scope, used by every pooled rate."""
    return f"{scope or ''}\x1f{key}"


def flag_rate(flags: Sequence[bool] | np.ndarray, clusters: Sequence[Hashable] | None = None) -> dict[str, Any]:
    """A false-positive (clean text) or detection (attacked text) rate: flagged / n with its
    interval. The one function behind every FPR and detection rate robusteval reports."""
    return proportion(np.asarray(flags, dtype=bool).tolist(), clusters, names=("flagged", "rate"))


def flip_rate(flips: Sequence[bool] | np.ndarray, clusters: Sequence[Hashable] | None = None) -> dict[str, Any]:
    """How often a judge's verdict changed under a change that should not matter (the two
    answers swapped, the rubric reworded): ``{"flips", "n", "rate", "ci", "ci_method"}``,
    flipped / compared with its interval. The one function behind every flip rate
    (:func:`robusteval.metrics.pairwise.position_flips`, ``rubric_flips``)."""
    return proportion(np.asarray(flips, dtype=bool).tolist(), clusters, names=("flips", "rate"))


def pct(p: dict[str, Any] | None, digits: int = 1) -> str:
    """``"12.5 [5.1, 27.0]"`` (percent with its 95 % interval), or ``"n/a"`` for n == 0."""
    value = None if not p else p.get("asr", p.get("rate"))
    if value is None or not p or not p.get("ci"):
        return "n/a"
    lo, hi = p["ci"]
    return f"{100 * value:.{digits}f} [{100 * lo:.{digits}f}, {100 * hi:.{digits}f}]"
