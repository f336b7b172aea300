"""Randomized median smoothing (issue 15): reproducible scores, one batched base call, the
certificate's math, and the empirical check that certified bounds hold for random attacks."""

from __future__ import annotations

import hashlib
import random

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from scipy import stats

from robusteval import Sample, detectors, metrics
from robusteval.defenses import certified_fraction, smooth
from robusteval.defenses.certificate import bounds, delta, lower_order_bound, median_band, upper_order_bound
from robusteval.defenses.perturbations import Mask, Synonym, load, substitution_set
from robusteval.errors import InputError
from robusteval.metrics.base import Metric
from robusteval.units import changed_units, units_of

TEXTS = {
    "english": "The movie was really good and the actors in that film were a great pick for the car chase",
    "chinese": "我觉得我们明天应该去公园散步。",
    "arabic": "أعتقد أننا يجب أن نذهب إلى الحديقة غدا.",
    "hindi": "मुझे लगता है कि हमें कल पार्क जाना चाहिए।",
    "russian": "Думаю, завтра нам стоит пойти в парк.",
    "french": "Je pense qu'on devrait aller au parc demain.",
}


def S(text: str, sid: str = "a") -> Sample:
    return Sample(id=sid, task="dialogue", response=text, context=("what shall we do ?",))


class Hashy(Metric):
    """Test victim: a pseudo-random 0-100 score per text (the worst case for smoothing: any
    change moves it), counting its calls and the texts it saw."""

    name = "hashy"

    def __init__(self) -> None:
        super().__init__()
        self.calls, self.seen = 0, 0

    def _score(self, samples: list[Sample]) -> np.ndarray:
        self.calls += 1
        self.seen += len(samples)
        return np.array([int(hashlib.sha256(s.response.encode()).hexdigest()[:8], 16) % 10_001 / 100.0
                         for s in samples])


class WordShare(Metric):
    """Test victim: the share (0-100) of the response's words that are 'good' words."""

    name = "word-share"
    good = frozenset({"movie", "film", "pic", "actor", "car", "auto", "automobile", "motorcar", "good"})

    def _score(self, samples: list[Sample]) -> np.ndarray:
        out = []
        for s in samples:
            w = [u.lower() for u in units_of(s.response).units]
            out.append(100.0 * sum(x in self.good for x in w) / max(len(w), 1))
        return np.array(out)


@pytest.mark.parametrize("language", sorted(TEXTS))
def test_units_keep_the_text_in_every_script(language: str) -> None:
    u = units_of(TEXTS[language])
    assert u.join(list(u.units)) == TEXTS[language] and u.units
    if language == "chinese":
        assert all(len(x) == 1 for x in u.units)  # unspaced script: one character per unit
    if language == "hindi":
        assert u.units[0] == "मुझे"  # vowel signs stay with their consonants


@pytest.mark.parametrize("language", sorted(TEXTS))
@pytest.mark.parametrize("perturbation", ["synonym", "mask", "char"])
def test_smoothed_score_is_the_median_of_its_draws_and_reproducible(language: str, perturbation: str) -> None:
    sample = S(TEXTS[language])
    a, b = smooth(Hashy(), perturbation, n=16, seed=3), smooth(Hashy(), perturbation, n=16, seed=3)
    got = a.score([sample])
    assert got.tolist() == b.score([sample]).tolist()  # fresh objects, same seed
    assert got[0] == pytest.approx(float(np.median(a.draw_scores([sample])[0])))
    assert a.draws(sample.response) == b.draws(sample.response)
    assert 0.0 <= got[0] <= 100.0


def test_different_seeds_draw_differently() -> None:
    text = TEXTS["english"]
    assert smooth(Hashy(), "mask", n=8, seed=0).draws(text) != smooth(Hashy(), "mask", n=8, seed=1).draws(text)


def test_all_draws_of_a_batch_go_to_the_base_metric_once() -> None:
    base = Hashy()
    m = smooth(base, "mask", n=32, seed=0, rate=0.5)
    batch = [S(TEXTS[k], k) for k in sorted(TEXTS)] + [S("ok", "short")]
    m.score(batch)
    distinct = sum(len(set(m.draws(s.response)) - {""}) for s in batch)
    assert base.calls == 1 and base.seen == distinct < 32 * len(batch)  # "ok" has at most 2 distinct draws
    assert m.report()["smoothing"]["draws_scored"] == distinct


def test_blank_draws_score_empty_and_are_counted() -> None:
    m = smooth(Hashy(), "mask", n=16, seed=0, rate=1.0)  # every unit masked: every draw is blank
    assert m.score([S("hello there")]).tolist() == [0.0]
    assert m.report()["fallbacks"]["blank_draw"] == 16


def test_bad_options_and_bad_input_are_clear_errors() -> None:
    with pytest.raises(ValueError, match="rate must be in"):
        smooth(Hashy(), "mask", rate=1.5)
    with pytest.raises(ValueError, match="n >= 1"):
        smooth(Hashy(), n=0)
    with pytest.raises(ValueError, match="no certificate"):
        smooth(Hashy(), "char").certify([S("hello there")])
    with pytest.raises(InputError, match="nothing to certify"):
        smooth(Hashy(), "mask").certify([S("\u200b ")])
    with pytest.raises(Exception, match="unknown smoothing perturbation"):
        load("typo")


def test_synonym_class_sets_are_symmetric() -> None:
    for word in ("movie", "car", "quickly", "actor", "good", "actors", "the"):
        for v in substitution_set(word):
            assert substitution_set(v) == substitution_set(word), (word, v)
    assert substitution_set("the") == ("the",) and substitution_set("actors") == ("actors",)
    assert "film" in substitution_set("movie")


def test_unit_distances() -> None:
    assert Mask(rate=0.9).unit_distance("anything") == pytest.approx(0.1)
    assert Synonym(rate=1.0).unit_distance("movie") == 0.0  # symmetric sets, always redrawn
    assert Synonym(rate=0.5).unit_distance("movie") == pytest.approx(0.5)
    assert Synonym(rate=1.0).unit_distance("the") == 0.0  # nothing to substitute
    # asymmetric WordNet sets: a substitution moves the distribution a lot
    assert Synonym(rate=1.0, sets="wordnet").unit_distance("good") > 0.5


def test_delta_takes_the_k_worst_units() -> None:
    assert delta([0.1, 0.5, 0.2], 0) == 0.0
    assert delta([0.1, 0.5, 0.2], 1) == pytest.approx(0.5)
    assert delta([0.1, 0.5, 0.2], 2) == pytest.approx(1 - 0.5 * 0.8)
    assert delta([0.1, 0.5, 0.2], 9) == pytest.approx(1 - 0.5 * 0.8 * 0.9)


def test_order_bounds_are_the_binomial_ranks() -> None:
    values = np.arange(1.0, 21.0)  # 20 draws, Y_(i) = i
    # lower: the largest l with BinomCDF(l-1; 20, 0.5) <= 0.05
    want_l = max(r for r in range(1, 21) if stats.binom.cdf(r - 1, 20, 0.5) <= 0.05)
    assert lower_order_bound(values, 0.5, 0.05) == float(want_l)
    want_u = min(u for u in range(1, 21) if stats.binom.cdf(u - 1, 20, 0.5) >= 0.95)
    assert upper_order_bound(values, 0.5, 0.05) == float(want_u)
    assert lower_order_bound(values, 0.0, 0.05) == 0.0 and upper_order_bound(values, 1.0, 0.05) == 100.0
    a, b = median_band(20, 0.05)
    assert 0 < a < 0.5 < b < 1 and a == pytest.approx(1 - b)
    # the observed median's band: P(Bin(20, a) <= r - 1) = 1 - alpha/4 at the edge
    assert stats.binom.cdf(9, 20, a) == pytest.approx(1 - 0.05 / 4, abs=1e-9)


@given(st.lists(st.floats(0, 100), min_size=1, max_size=64), st.integers(0, 4),
       st.lists(st.floats(0, 1), min_size=0, max_size=12))
@example([50.0], 0, [])
@example([0.0, 100.0], 3, [1.0])
@settings(max_examples=60)
def test_certificate_contains_the_smoothed_score_and_widens_with_radius(values: list[float], radius: int,
                                                                       dist: list[float]) -> None:
    v = np.array(values)
    lo, hi = bounds(v, dist, radius, 0.05)
    assert 0.0 <= lo <= float(np.median(v)) <= hi <= 100.0
    lo2, hi2 = bounds(v, dist, radius + 1, 0.05)
    assert lo2 <= lo and hi2 >= hi


def _random_substitution(text: str, k: int, rng: random.Random, within_sets: bool) -> str:
    u = units_of(text)
    words = list(u.units)
    where = [i for i, w in enumerate(words) if len(substitution_set(w)) > 1] if within_sets else list(range(len(words)))
    for i in rng.sample(where, min(k, len(where))):
        if within_sets:
            words[i] = rng.choice([v for v in substitution_set(words[i]) if v != words[i].lower()])
        else:
            words[i] = rng.choice(["zebra", "quantum", "purple", "xylophone", "mango"])
    return u.join(words)


@pytest.mark.parametrize(("perturbation", "options", "metric", "within_sets", "min_informative"), [
    ("mask", {"rate": 0.9}, Hashy, False, 10),
    # a share over the few unmasked words is noisy: most of its certificates span the whole range
    ("mask", {"rate": 0.9}, WordShare, False, 3),
    ("synonym", {"rate": 1.0}, WordShare, True, 10),
])
def test_certified_bounds_hold_for_random_attacks(perturbation: str, options: dict, metric: type,
                                                  within_sets: bool, min_informative: int) -> None:
    """The issue's empirical check: for random substitutions of up to k units, the attacked
    text's observed smoothed score is inside the clean text's certificate in >= 1 - alpha of cases."""
    alpha = 0.05
    m = smooth(metric(), perturbation, n=48, seed=0, alpha=alpha, **options)
    rng = random.Random(0)
    inside = total = informative = 0
    texts = [TEXTS["english"], "I think the movie and the car were good", "a film about an actor who drives a car",
             "we should quickly go to the park by auto tomorrow", "the pic was good but the actor was bad"]
    for radius in (1, 2, 3):
        certs = m.certify([S(t, f"t{i}") for i, t in enumerate(texts)], radius=radius)
        for i, (t, cert) in enumerate(zip(texts, certs, strict=True)):
            informative += cert.upper - cert.lower < 100.0
            for _ in range(8):
                attacked = _random_substitution(t, radius, rng, within_sets)
                assert (changed_units(t, attacked) or 0) <= radius
                got = float(m.score([S(attacked, f"t{i}")])[0])
                inside += cert.lower <= got <= cert.upper
                total += 1
    assert total == 120 and inside / total >= 1 - alpha
    assert informative >= min_informative  # of 15 certificates: not the trivial [0, 100]


def test_certified_radius_and_tolerance() -> None:
    m = smooth(WordShare(), "synonym", n=32, seed=0)
    sample = S("the movie and the car")
    # symmetric sets, rate 1: substitutions within sets do not move the distribution at all
    assert m.certify([sample], radius=3)[0].delta == 0.0
    assert m.certified_radius([sample], tolerance=100.0, max_radius=4) == [4]
    tight = smooth(Hashy(), "mask", n=16, seed=0, rate=0.3)
    assert tight.certified_radius([S(TEXTS["english"])], tolerance=0.0) == [-1]


def test_smoothing_composes_with_a_guard_and_a_checkpoint(tiny_bert, tmp_path) -> None:
    from test_cross_encoder import _save_robusteval_folder

    sample = S("teacher: the movie was good", "g")
    guarded_smooth = detectors.guard(smooth(WordShare(), "synonym", n=8), ["speaker_tag"], policy="floor")
    assert guarded_smooth.score([sample]).tolist() == [0.0]  # the guard screens the real text
    smooth_guarded = smooth(detectors.guard(WordShare(), ["speaker_tag"], policy="floor"), "mask", n=8, rate=0.3)
    assert 0.0 <= smooth_guarded.score([sample])[0] <= 100.0
    _save_robusteval_folder(tiny_bert, tmp_path)
    learned = smooth(metrics.load("cross-encoder", checkpoint=str(tmp_path)), "mask", n=8, seed=0)
    twice = [learned.score([S(TEXTS["english"])])[0] for _ in range(2)]
    assert twice[0] == twice[1] and 0.0 <= twice[0] <= 100.0
    assert "smooth=median,n=8,seed=0" in learned.reproducibility()


def test_certified_fraction_counts_radii_at_or_above() -> None:
    clustered = certified_fraction([3, 3, 3, 0, 0, 0], 2, ["对话 a"] * 3 + ["حوار b"] * 3)
    assert (clustered["certified"], clustered["n"], clustered["ci_method"]) == (3, 6, "cluster-bootstrap")
    lone = certified_fraction([3, 3, 3, 0, 0, 0], 2)["ci"]
    assert clustered["ci"][1] - clustered["ci"][0] > lone[1] - lone[0]  # two conversations, not six samples
    got = certified_fraction([-1, 0, 1, 2, 3, 3], 2)
    assert (got["certified"], got["n"]) == (3, 6) and got["rate"] == pytest.approx(0.5)
    lo, hi = got["ci"]
    assert lo < 0.5 < hi
    assert certified_fraction([-1, 0], 0)["certified"] == 1


@pytest.mark.parametrize("n", [1, 2, 3, 8, 16, 33])
def test_median_band_for_odd_and_even_n(n: int) -> None:
    a, b = median_band(n, 0.05)
    r, s = (n - 1) // 2 + 1, n // 2 + 1
    # each side fails with probability alpha / 4 exactly at the band's edge
    assert stats.binom.sf(r - 1, n, a) == pytest.approx(0.05 / 4, abs=1e-9)
    assert stats.binom.cdf(s - 1, n, b) == pytest.approx(0.05 / 4, abs=1e-9)
    assert a == pytest.approx(1 - b)


def test_population_median_bounds_are_tighter_and_contain_the_median() -> None:
    v = np.linspace(0, 100, 64)
    lo_obs, hi_obs = bounds(v, [0.1], 1, 0.05)
    lo_pop, hi_pop = bounds(v, [0.1], 1, 0.05, observed=False)
    assert lo_obs <= lo_pop <= float(np.median(v)) <= hi_pop <= hi_obs


def test_a_redrawn_word_takes_the_case_of_the_word_it_replaces() -> None:
    syn = Synonym(rate=1.0)
    rng = random.Random(0)
    assert {syn.draw("MoVie", rng) for _ in range(60)} == {"Movie", "Film", "Pic"}
    assert {syn.draw("MOVIE", rng) for _ in range(60)} == {"MOVIE", "FILM", "PIC"}
    # "Film" for "MoVie" (the word's case) is covered: the same draws; a kept word is not redrawn
    assert syn.unit_distance("MoVie") == 0.0
    assert Synonym(rate=0.5).unit_distance("MoVie") == pytest.approx(0.5)


def test_a_mixed_case_word_re_cased_is_a_covered_substitution() -> None:
    """"Mckinsey" for "McKinsey" is one changed unit (changed_units counts it) and the only
    substitute of a one-member set written in the word's case: the two texts' draws never
    meet (each keeps its own spelling), so the unit's distance is 1, not 0 (the certificate
    claimed a zero-width band that the re-cased text's score fell outside of)."""
    assert changed_units("McKinsey and YouTube", "Mckinsey and Youtube") == 2
    for word in ("McKinsey", "YouTube", "iPhone"):
        assert substitution_set(word, 8, "classes") == (word.lower(),)
        assert Synonym(rate=1.0).unit_distance(word) == 1.0 and Synonym(rate=0.5).unit_distance(word) == 1.0
    for word in ("movie", "Movie", "MOVIE", "NASA", "London", "北京"):  # written in their own case: no change
        assert Synonym(rate=1.0).unit_distance(word) == 0.0, word


def test_bounds_are_the_documented_order_statistics_exactly() -> None:
    """Steps 3 and 4 of docs/smoothing.md, computed here without the module's helpers (the
    median band from the binomial tail by root finding): 48 draws Y_(i) = i, alpha 0.05, one
    unit at distance 0.1, radius 1. Observed: ranks at a - 0.1 and b + 0.1 with alpha / 4 on
    each side; population median: at 1/2 -+ 0.1 with alpha / 2."""
    from scipy.optimize import brentq

    n, alpha, d = 48, 0.05, 0.1
    values = np.arange(1.0, n + 1)
    r, s = (n - 1) // 2 + 1, n // 2 + 1  # numpy's median of 48 values: the mean of Y_(24) and Y_(25)
    a = brentq(lambda p: stats.binom.sf(r - 1, n, p) - alpha / 4, 1e-12, 0.5)  # P(Bin(n, a) >= r) = alpha/4
    b = brentq(lambda p: stats.binom.cdf(s - 1, n, p) - alpha / 4, 0.5, 1 - 1e-12)  # P(Bin(n, b) < s) = alpha/4

    def lower(p: float, level: float) -> float:
        return float(max(k for k in range(1, n + 1) if stats.binom.cdf(k - 1, n, p) <= level))

    def upper(p: float, level: float) -> float:
        return float(min(k for k in range(1, n + 1) if stats.binom.cdf(k - 1, n, p) >= 1 - level))

    assert bounds(values, [d], 1, alpha) == (lower(a - d, alpha / 4), upper(b + d, alpha / 4))
    assert bounds(values, [d], 1, alpha, observed=False) == (lower(0.5 - d, alpha / 2), upper(0.5 + d, alpha / 2))
    assert bounds(values, [d], 0, alpha) == (lower(a, alpha / 4), upper(b, alpha / 4))  # radius 0: no shift
    assert bounds(values, [d], 1, alpha) != bounds(values, [d], 1, 2 * alpha)  # alpha enters


def test_an_empty_score_outside_the_score_range_is_refused() -> None:
    """A blank draw scores empty_score: one outside 0-100 would sit outside the 0 / 100 ends
    that the certificate falls back to, so the certificate would not contain its own score."""
    for bad in (-5.0, 100.5, float("nan")):
        with pytest.raises(ValueError, match="empty_score must be a score in"):
            metrics.load("rougeL", on_empty="floor", empty_score=bad)
    assert metrics.load("rougeL", on_empty="floor", empty_score=100.0).empty_score == 100.0


def test_changed_units_needs_the_same_cut() -> None:
    assert changed_units("the movie was good", "the film was good") == 1
    assert changed_units("the movie was good", "the Film was good") == 1
    assert changed_units("a well-known b", "a famous b") is None  # two units became one
    assert changed_units("hi there.", "hi there!") is None  # punctuation is a separator
    assert changed_units("我们去公园", "我们去公圆") == 1


def test_smoothing_a_reject_guard_counts_refused_draws() -> None:
    guarded = detectors.guard(WordShare(), ["speaker_tag"], policy="reject")
    m = smooth(guarded, "mask", n=8, seed=0, rate=0.2)
    got = m.score([S("teacher: the movie was good")])  # every draw keeping "teacher" is refused
    assert 0.0 <= got[0] <= 100.0 and m.report()["fallbacks"]["refused_draw"] > 0
    assert not hasattr(m, "details") and not hasattr(m, "policy")  # the guard's record is not ours
