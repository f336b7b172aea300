from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from robusteval import Sample
from robusteval.metaeval import bootstrap_ci, correlate, correlation, correlation_change, metaevaluate, system_level


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
    refused = np.array(scores, dtype=float)
    refused[3] = np.nan  # a text a reject guard refused leaves its system's means, not every system
    one_out = system_level(samples, refused, "coherence")
    assert (one_out["n_systems"], one_out["dropped_nonfinite"], one_out["spearman"]) == (4, 1, pytest.approx(1.0))


def test_metaeval_table_names_the_n_of_a_cell_on_fewer_pairs() -> None:
    """An aspect rated on 40 of 100 samples: the row's n is 100 and that cell says 40."""
    from robusteval.cli.metaeval_cmd import render_markdown

    samples = [Sample(id=f"s{i}", task="dialogue", response="x", context=("c",),
                      human={"overall": float(i % 5), **({"engaging": float(i % 3)} if i < 40 else {})})
               for i in range(100)]
    res = metaevaluate(samples, np.arange(100, dtype=float), n_boot=0)
    assert (res["overall"]["n"], res["engaging"]["n"]) == (100, 40)
    md = render_markdown({"datasets": [{"name": "toy", "aspects": ["overall", "engaging"]}],
                          "results": {"toy": {"m": res}}})
    row = next(line for line in md.splitlines() if line.startswith("| m |"))
    assert row.startswith("| m | 100 | ") and row.endswith(" (n 40) |") and row.count("(n ") == 1
    assert "n up to 100" in md


def test_correlation_change_is_after_minus_before_with_a_paired_interval() -> None:
    """The change is the difference of the two whole-set correlations; its interval is paired:
    a defense that adds the same small noise to a strong metric moves its Spearman little, and
    the paired interval is far narrower than the gap two separate intervals would allow."""
    rng = np.random.default_rng(3)
    human = rng.normal(size=120)
    before = human + rng.normal(scale=0.8, size=120)
    after = before + rng.normal(scale=0.2, size=120)
    clusters = [f"c{i // 3}" for i in range(120)]  # 40 conversations of 3 replies
    e = correlation_change(before, after, human, clusters, n_boot=400, seed=1)
    want = stats.spearmanr(after, human).statistic - stats.spearmanr(before, human).statistic
    assert e["change"] == pytest.approx(want, abs=1e-6)
    assert e["before"] == pytest.approx(stats.spearmanr(before, human).statistic, abs=1e-6)
    assert (e["n"], e["n_contexts"], e["ci_method"]) == (120, 40, "paired cluster-bootstrap")
    lo, hi = e["ci"]
    assert lo <= e["change"] <= hi
    one = correlate(before, human, n_boot=400, seed=1, clusters=clusters)["spearman"]["ci95"]
    assert hi - lo < 0.5 * (one[1] - one[0])  # paired: far narrower than one side's own interval
    # a metric compared with itself changes by exactly 0, on every draw
    same = correlation_change(before, before, human, clusters, n_boot=50)
    assert same["change"] == 0 and same["ci"] == [0.0, 0.0]


def test_correlation_change_drops_an_item_from_both_sides_and_checks_lengths() -> None:
    human = np.arange(10.0)
    before = human.copy()
    after = human[::-1].copy()
    after[0] = np.nan  # the after metric could not score item 0: neither side correlates it
    e = correlation_change(before, after, human, n_boot=0)
    assert e["n"] == 9 and e["change"] == pytest.approx(-2.0) and e["ci"] is None
    constant = correlation_change(before, np.ones(10), human, n_boot=100)
    assert constant["after"] is None and constant["change"] is None and constant["ci"] is None
    with pytest.raises(ValueError, match="9 after"):
        correlation_change(before, after[:9], human)
    with pytest.raises(ValueError, match="cluster labels"):
        correlation_change(before, after, human, clusters=["a"] * 3)


def test_metaevaluate_change_uses_the_rated_samples_clustered_by_conversation() -> None:
    from robusteval.metaeval import metaevaluate_change

    texts = ["谢谢你的帮助", "شكرا جزيلا", "धन्यवाद", "Спасибо большое", "Merci beaucoup", "Thanks a lot"]
    samples = [Sample(id=f"s{i}", task="dialogue", context=(f"ctx {i // 2}",), response=texts[i % 6],
                      human={} if i % 5 == 4 else {"overall": float(i % 4)}) for i in range(20)]
    before = np.array([float(i % 4) + 0.1 * i for i in range(20)])
    after = before[::-1].copy()
    e = metaevaluate_change(samples, before, after, "overall", n_boot=200)
    rated = [i for i, s in enumerate(samples) if s.human]
    want = correlation_change(before[rated], after[rated], np.array([samples[i].human["overall"] for i in rated]),
                              [samples[i].conversation_key() for i in rated], 200, 0)
    assert e == want and e["n"] == 16 and e["n_contexts"] == 10
    with pytest.raises(ValueError, match="20 samples, 19 before"):
        metaevaluate_change(samples, before[:19], after, "overall")


def test_bootstrap_ci_takes_the_pairs_as_given() -> None:
    """``bootstrap_ci`` correlates every pair it is given (``correlate`` drops the non-finite
    ones before): a NaN score makes every draw that holds it undefined, most draws do, so there
    is no interval, where ``correlation_draws`` alone would leave the pair out of each draw."""
    from robusteval.metaeval import correlation_draws
    from robusteval.stats import cluster_bootstrap_indices

    rng = np.random.default_rng(2)
    x, y = rng.normal(size=30), rng.normal(size=30)
    x[1] = np.nan
    assert bootstrap_ci(x, y, "spearman", n_boot=200, seed=3) is None
    plan = cluster_bootstrap_indices(range(30), 50, 3)
    assert np.isfinite(correlation_draws(x, y, plan)).mean() > 0.9
    assert np.isfinite(correlation_draws(x, y, plan, drop_nonfinite=False)).mean() < 0.5  # draws without it
