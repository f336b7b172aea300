from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from robusteval import Sample
from robusteval.metaeval import bootstrap_ci, correlation, metaevaluate, system_level


def test_correlations_match_scipy() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=50)
    y = x + rng.normal(size=50)
    assert correlation(x, y, "spearman") == pytest.approx(stats.spearmanr(x, y).statistic)
    assert correlation(x, y, "kendall") == pytest.approx(stats.kendalltau(x, y).statistic)
    assert correlation(x, y, "pearson") == pytest.approx(stats.pearsonr(x, y).statistic)
    assert correlation(np.ones(5), y[:5], "spearman") is None  # constant metric
    assert correlation(x[:2], y[:2], "pearson") is None


def test_bootstrap_ci_is_seeded_and_brackets_r() -> None:
    rng = np.random.default_rng(1)
    x = rng.normal(size=80)
    y = x + rng.normal(size=80)
    lo, hi = bootstrap_ci(x, y, "spearman", n_boot=300, seed=5)
    r = correlation(x, y, "spearman")
    assert lo < r < hi and hi - lo < 0.5
    assert bootstrap_ci(x, y, "spearman", n_boot=300, seed=5) == (lo, hi)


def test_metaevaluate_turn_and_system_level() -> None:
    samples, scores = [], []
    for sys_i in range(4):
        for j in range(5):
            h = sys_i + 0.1 * j
            samples.append(Sample(id=f"{sys_i}-{j}", task="summarization", response="x",
                                  human={"coherence": h, "fluency": 5 - h}, meta={"system_id": f"M{sys_i}"}))
            scores.append(10 * h)
    res = metaevaluate(samples, np.array(scores), n_boot=50, system=True)
    assert res["coherence"]["spearman"]["r"] == pytest.approx(1.0)
    assert res["fluency"]["kendall"]["r"] == pytest.approx(-1.0)
    assert res["coherence"]["system"]["n_systems"] == 4
    assert res["coherence"]["system"]["spearman"] == pytest.approx(1.0)
    assert system_level(samples[:5], np.array(scores[:5]), "coherence") is None  # one system
    assert metaevaluate(samples, np.array(scores), ["missing"], n_boot=0)["missing"]["n"] == 0
