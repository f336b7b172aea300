"""guard(): policies, details in outputs, thresholds; calibration and evaluation."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest
from robusteval.detectors.base import Detector
from robusteval.detectors.calibrate import calibrate, evaluate, threshold_for
from robusteval.detectors.guarded import GuardRejection
from toy import LengthMetric as ToyLength

from robusteval import Sample, detectors, metrics
from robusteval.attacks.victim import CachedVictim
from robusteval.errors import DataFormatError, RobustevalError
from robusteval.metrics.base import Metric

LengthMetric = functools.partial(ToyLength, per_word=10.0)


class HasX(Detector):
    """Suspicion = share of 'x' tokens."""

    name: ClassVar[str] = "has_x"
    family: ClassVar[str] = "test"
    default_threshold: ClassVar[float] = 0.5

    def _analyze(self, samples: list[Sample]) -> list[dict[str, Any]]:
        return [{"suspicion": s.response.split().count("x") / len(s.response.split())} for s in samples]


def S(i: int, text: str) -> Sample:
    return Sample(id=f"s{i}", task="dialogue", response=text, context=("hello there",), reference="a b c")


SAMPLES = [S(0, "a b c d"), S(1, "x x a b"), S(2, "x x x x")]


@pytest.mark.parametrize(("policy", "expected"), [
    ("flag", [40.0, 40.0, 40.0]), ("floor", [40.0, 0.0, 0.0]), ("penalize", [40.0, 20.0, 20.0])])
def test_policies(policy: str, expected: list[float]) -> None:
    g = detectors.guard(LengthMetric(), [HasX()], policy=policy)
    assert isinstance(g, Metric) and g.name == "guarded-length"
    assert g.score(SAMPLES).tolist() == expected
    d = g.details(SAMPLES[1])
    assert d == {"raw_score": 40.0, "guarded_score": expected[1], "flagged": ["has_x"], "rejected": False,
                 "pressure": 1.0, "suspicion": {"has_x": 0.5}}
    assert g.report()["guard"]["flagged"] == {"has_x": 2, "any": 2}


class HasManyX(HasX):
    """``has_x`` at another threshold, under a name of its own (a guard takes each name once)."""

    name: ClassVar[str] = "has_many_x"


def test_penalize_compounds_per_flagging_detector() -> None:
    g = detectors.guard(LengthMetric(), [HasX(), HasManyX(threshold=0.9)], policy="penalize", penalty=0.5)
    assert g.score(SAMPLES).tolist() == [40.0, 20.0, 10.0]


def test_reject_names_the_sample_and_detector() -> None:
    g = detectors.guard(LengthMetric(), [HasX()], policy="reject")
    assert g.score(SAMPLES[:1]).tolist() == [40.0]
    with pytest.raises(GuardRejection, match=r"s1.*flagged by has_x"):
        g.score(SAMPLES)


def test_guard_validates_and_accepts_names_and_dicts() -> None:
    with pytest.raises(ValueError, match="policy"):
        detectors.guard(LengthMetric(), [HasX()], policy="block")
    with pytest.raises(ValueError, match="at least one"):
        detectors.guard(LengthMetric(), [])
    g = detectors.guard("rougeL", ["nonalnum", {"name": "speaker_tag", "options": {"threshold": 0.9}}])
    assert [d.name for d in g.detectors] == ["nonalnum", "speaker_tag"] and g.detectors[1].threshold == 0.9
    assert "guard=floor" in g.reproducibility() and "nonalnum" in g.reproducibility()


def test_guarded_real_metric_floors_a_trigger_and_is_attackable() -> None:
    g = detectors.guard(metrics.load("rougeL", against="reference"), ["nonalnum", "speaker_tag"])
    s = Sample(id="r", task="dialogue", response="a b c", reference="a b c", context=("hi",))
    v = CachedVictim(g)
    scores = v.score(s, ["a b c", "teacher: a b c", "a b c ~&;$}%("])
    assert scores[0] == 100.0 and scores[1] == 0.0 and scores[2] == 0.0
    assert g.details(s.with_response("teacher: a b c"))["flagged"] == ["speaker_tag"]


def test_threshold_for_exact() -> None:
    s = np.array([0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9])
    t = threshold_for(s, 0.2)
    assert 0.7 < t <= 0.7 + 1e-12 and np.mean(s >= t) == 0.2
    assert threshold_for(s, 0.0) > 0.9 and np.mean(s >= threshold_for(s, 0.0)) == 0.0
    assert threshold_for(np.ones(5), 0.01) > 1.0  # saturated on clean data: never fires


def test_threshold_for_with_a_confidence_bounds_the_fpr() -> None:
    """With a confidence the threshold flags the most calibration values whose upper bound stays
    within the target: 4 of 1,000 at 1 % and 95 % (the point estimate allows 10), none of 200
    (even 0 of 200 bounds at 1.5 %), and ties are never split."""
    from robusteval.stats import binomial_upper

    s = np.linspace(0.0, 0.999, 1000)[::-1].copy()
    t = threshold_for(s, 0.01, 0.95)
    assert int(np.sum(s >= t)) == 4 and int(np.sum(s >= threshold_for(s, 0.01))) == 10
    assert binomial_upper(4, 1000, 0.95) <= 0.01 < binomial_upper(5, 1000, 0.95)
    assert 4 < int(np.sum(s >= threshold_for(s, 0.01, 0.5))) <= 10  # a weaker confidence allows more
    small = np.linspace(0.0, 0.5, 200)
    assert int(np.sum(small >= threshold_for(small, 0.01, 0.95))) == 0
    tied = np.r_[np.full(6, 0.9), np.zeros(994)]
    assert int(np.sum(tied >= threshold_for(tied, 0.01, 0.95))) == 0  # 6 tied: all or none, and 6 is too many


def test_calibrate_with_a_confidence_records_the_bound() -> None:
    from robusteval.stats import binomial_upper

    # 400 clean texts, 9 with a distinct share of "x": at 1 % the point estimate flags 4, the
    # bound at 95 % none (1 of 400 bounds at 1.18 %)
    clean = {"c": [S(i, "x " * max(0, i - 390) + "a " * 20) for i in range(400)]}
    point = calibrate([HasX()], clean, target_fpr=0.01, combined=False)
    bound = calibrate([HasX()], clean, target_fpr=0.01, combined=False, confidence=0.95)
    assert point["confidence"] is None and "fpr_upper_bound" not in point["detectors"]["has_x"]
    assert point["detectors"]["has_x"]["calibration_fpr"] == 0.01
    e = bound["detectors"]["has_x"]
    assert bound["confidence"] == 0.95 and e["calibration_fpr"] == 0.0
    assert e["fpr_upper_bound"] == binomial_upper(0, 400, 0.95) == pytest.approx(1 - 0.05 ** (1 / 400))


def test_a_combined_bound_splits_the_confidence_too() -> None:
    """k detectors combined: each is bounded at target / k *and* at 1 - (1 - c) / k, so the union
    stays within the target unless one of the k bounds fails (at most 1 - c); per group as in
    the pool, and ``floor_at_default`` keeps the bound of what it actually flags."""
    from robusteval.detectors.calibrate import calibrate_groups

    from robusteval.stats import binomial_upper

    clean = {"c": [S(i, "x " * max(0, i - 1980) + "a " * 20) for i in range(2000)]}
    alone = calibrate([HasX()], clean, target_fpr=0.004, combined=True, confidence=0.9)
    assert alone["per_detector_confidence"] == 0.9  # one detector: nothing to split
    two = calibrate([HasX(), detectors.load("nonalnum")], clean, target_fpr=0.008, confidence=0.9)
    assert two["per_detector_fpr"] == 0.004 and two["per_detector_confidence"] == pytest.approx(0.95)
    # at 0.4 % of 2,000, 90 % allows 4 texts, 95 % only 3
    assert binomial_upper(4, 2000, 0.9) <= 0.004 < binomial_upper(4, 2000, 0.95)
    assert round(alone["detectors"]["has_x"]["calibration_fpr"] * 2000) == 4
    e = two["detectors"]["has_x"]
    assert round(e["calibration_fpr"] * 2000) == 3
    assert e["fpr_upper_bound"] == binomial_upper(3, 2000, two["per_detector_confidence"])
    grouped = calibrate_groups([HasX(), detectors.load("nonalnum")], clean, target_fpr=0.008, confidence=0.9,
                               floor_at_default=True)
    g = next(iter(grouped["groups"].values()))["detectors"]["has_x"]
    # the class default 0.5 is above every clean value: nothing flagged, and the bound says so
    assert g["threshold"] == 0.5 and g["calibration_fpr"] == 0.0
    assert g["fpr_upper_bound"] == binomial_upper(0, 2000, grouped["per_detector_confidence"])


def _counts(rate: dict[str, Any]) -> dict[str, Any]:
    """The counts of a rate entry (intervals, if reported, are checked where they are computed)."""
    return {k: rate[k] for k in ("n", "flagged", "rate")}


def test_calibrate_splits_the_target_and_evaluate_reports_rates(tmp_path) -> None:
    clean = {"c": [S(i, "a b c " * (i % 7 + 1)) for i in range(100)]}
    result = calibrate([HasX(), detectors.load("nonalnum")], clean, target_fpr=0.02)
    assert result["per_detector_fpr"] == 0.01 and set(result["detectors"]) == {"has_x", "nonalnum"}
    assert all(e["calibration_fpr"] <= 0.01 for e in result["detectors"].values())
    path = tmp_path / "thresholds.json"
    path.write_text(json.dumps(result))
    g = detectors.guard(LengthMetric(), [detectors.load("nonalnum")], thresholds=path)
    assert g.detectors[0].threshold == result["detectors"]["nonalnum"]["threshold"]
    rows = [{"attack": "dot", "family": "universal", "direction": "R-", "sample_id": "s0", "adversarial": ".",
             "applicable": True}, {"attack": "tag", "family": "rules", "direction": "R-", "sample_id": "s0",
                                   "adversarial": "x x a", "applicable": True}]
    attacked = [(r, S(0, r["adversarial"])) for r in rows]
    ev = evaluate([HasX(), detectors.load("nonalnum")], attacked, clean)
    assert _counts(ev["detection_by_family"]["nonalnum"]["universal (R-)"]) == {"n": 1, "flagged": 1, "rate": 1.0}
    assert ev["detection_by_family"]["has_x"]["rules (R-)"]["rate"] == 1.0
    assert ev["detection_by_family"]["combined"]["universal (R-)"]["rate"] == 1.0
    assert _counts(ev["false_positive_rate"]["combined"]["c"]) == {"n": 100, "flagged": 0, "rate": 0.0}


def test_evaluate_intervals_resample_contexts_not_texts() -> None:
    """Ten clean replies to each of ten contexts, one context's all flagged: the FPR interval is
    the cluster bootstrap of those contexts (wider than ten independent replies' Wilson); the
    counts are the same either way."""
    from robusteval.detectors.calibrate import rates

    from robusteval.stats import flag_rate

    flags = np.array([True] * 10 + [False] * 90)
    ctx = [f"سياق {i // 10}" for i in range(100)]
    got = rates(flags, ["clean"] * 100, ctx)["clean"]
    assert (got["flagged"], got["n"], got["ci_method"]) == (10, 100, "cluster-bootstrap")
    assert got["ci"] == flag_rate(flags, ctx)["ci"] and got["ci"][1] > flag_rate(flags)["ci"][1]
    clean = {"c": [Sample(id=f"c{i}", task="dialogue", context=(ctx[i],), response=f"x x réponse {i}" if i < 10
                          else f"réponse {i}") for i in range(100)]}
    ev = evaluate([HasX()], [], clean)
    assert ev["false_positive_rate"]["has_x"]["c"]["ci"] == got["ci"]


# -- shipped default thresholds per task and language (issue 14) -----------------------------------
def _table(sig: str = "") -> dict[str, Any]:
    return {"dialogue/en": {"has_x": {"threshold": 0.3, "signature": sig}},
            "dialogue/fr": {"has_x": {"threshold": 0.6, "signature": sig}},
            "dialogue/und-cjk": {"has_x": {"threshold": 0.9, "signature": sig}},
            "summarization/en": {"has_x": {"threshold": 0.4, "signature": "other settings"}}}


def test_default_thresholds_follow_task_and_language_then_the_most_permissive() -> None:
    from robusteval.detectors.defaults import thresholds

    d = HasX()
    samples = [Sample(id="en", task="dialogue", response="I think that is a good idea"),
               Sample(id="fr", task="dialogue", response="Je pense que c'est une bonne idée"),
               Sample(id="zh", task="dialogue", response="我觉得这是个好主意"),
               Sample(id="declared", task="dialogue", response="ok", meta={"language": "fr-FR"}),
               Sample(id="ru", task="dialogue", response="Я думаю, это хорошая идея"),  # no ru group
               Sample(id="sum", task="summarization", response="A summary."),  # signature differs
               Sample(id="d2t", task="data_to_text", response="A table row.")]  # no group for the task
    assert thresholds(d, samples, _table()).tolist() == [0.3, 0.6, 0.9, 0.6, 0.9, 0.5, 0.5]
    given = HasX(threshold=0.2)  # a threshold the user gave always wins
    assert thresholds(given, samples, _table()).tolist() == [0.2] * 7


def test_a_new_detector_version_retires_thresholds_calibrated_before(tmp_path, monkeypatch) -> None:
    """Same settings, another version: the shipped table, a thresholds file and a joint guard
    all stop applying what was calibrated for the old version (Detector.identity)."""
    from robusteval.detectors import joint
    from robusteval.detectors.base import apply_thresholds
    from robusteval.detectors.defaults import thresholds

    class HasX2(HasX):
        version: ClassVar[int] = 2

    old, new = HasX(), HasX2()
    assert old.identity() == old.signature() == "" and new.identity() == "v2|"
    sample = [Sample(id="en", task="dialogue", response="I think that is a good idea")]
    assert thresholds(old, sample, _table()).tolist() == [0.3]
    assert thresholds(new, sample, _table()).tolist() == [0.5]  # the class default, not v1's 0.3
    assert thresholds(new, sample, _table(new.identity())).tolist() == [0.3]
    with pytest.raises(RobustevalError, match="recalibrate"):
        apply_thresholds(new, {"has_x": {"threshold": 0.3, "signature": old.identity()}}, tmp_path / "t.json")
    clean = np.zeros((20, 1))
    params = joint.fit(np.r_[clean, np.ones((20, 1))], np.r_[np.zeros(20), np.ones(20)], clean, 0.05,
                       ["has_x"], [old.identity()])
    load = detectors.load
    monkeypatch.setattr(detectors, "load", lambda name, **kw: HasX2() if name == "has_x" else load(name, **kw))
    with pytest.raises(RobustevalError, match="fitted with settings ''"):
        load("joint", model=params)


def test_flags_and_the_guard_use_the_per_sample_default(monkeypatch) -> None:
    from robusteval.detectors import defaults

    monkeypatch.setattr(defaults, "shipped", lambda: _table())
    en = Sample(id="en", task="dialogue", response="x is what I think x is for x")  # x share 0.33
    fr = Sample(id="fr", task="dialogue", response="x je pense que x est vraiment bien")  # x share 0.25
    assert HasX().flags([en, fr]).tolist() == [True, False]  # 0.33 >= 0.3 (en); 0.25 < 0.6 (fr)
    g = detectors.guard(LengthMetric(), [HasX()], policy="floor")
    assert g.score([en, fr]).tolist() == [0.0, 80.0]
    assert "has_x[]@default[" in g.reproducibility()


def test_the_shipped_table_covers_every_xdial_language_and_summaries() -> None:
    from robusteval.detectors.defaults import shipped

    table = shipped()
    want = {"dialogue/en", "dialogue/fr", "dialogue/de", "dialogue/es", "dialogue/und-arabic", "dialogue/und-cjk",
            "dialogue/und-devanagari", "dialogue/und-hangul", "dialogue/und-cyrillic", "summarization/en"}
    assert want <= set(table)
    for group in want:
        assert set(table[group]) == set(detectors.names()), group


def test_the_shipped_table_was_calibrated_on_conversation_halves(data_dir) -> None:
    """The shipped thresholds were fitted on the calibration halves as they are drawn now, so the
    held-out rates in BENCHMARKS §9b are out of sample: the table says so, and each of its clean
    sets counts exactly the texts of today's calibration half (the id halves counted others)."""
    import json

    from robusteval.detectors.clean import CLEAN_SPLIT, load_clean

    from robusteval.paths import resource

    made = json.loads(resource("detectors/default_thresholds.json").read_text(encoding="utf-8"))
    assert made["clean_split"] == CLEAN_SPLIT == "conversation"
    assert made["clean_sets"] == {n: len(load_clean(n, "calibration", data_dir)) for n in made["clean_sets"]}


def _shipped_signatures_match(names: list[str]) -> None:
    """Each detector as a user gets it (``detectors.load(name)``, what ``guard(metric, [name])``
    builds) and as the shipped config builds it has the signature its shipped entries were
    calibrated under: an entry whose signature no longer matches is silently skipped (the class
    default applies instead), so a change to a detector's defaults, settings, model identity or
    version must come with a recalibrated table (configs/guard/defaults.yaml)."""
    import yaml
    from robusteval.detectors.defaults import shipped

    config = yaml.safe_load((Path(__file__).resolve().parents[1] / "configs/guard/defaults.yaml").read_text())
    specs = {(x if isinstance(x, str) else x["name"]): x for x in config["detectors"]}
    table = shipped()
    for name in names:
        for built in (detectors.load(name), detectors.resolve([specs[name]])[0]):
            stale = {g for g, entries in table.items() if entries[name]["signature"] != built.identity()}
            assert not stale, f"{name}: the shipped thresholds of {sorted(stale)} were calibrated with other settings"


def test_the_shipped_table_matches_the_detectors_as_they_are_now() -> None:
    _shipped_signatures_match([n for n in detectors.names() if n != "perplexity"])


@pytest.mark.slow
def test_the_shipped_perplexity_thresholds_match_the_default_model() -> None:
    _shipped_signatures_match(["perplexity"])  # loads SmolLM2


# -- the learned joint guard (issue 14) ----------------------------------------------------------
def test_joint_guard_fits_calibrates_saves_as_json_and_reloads(tmp_path) -> None:
    from robusteval.detectors import joint

    rng = np.random.default_rng(0)
    clean = rng.uniform(0.0, 0.3, size=(200, 2))
    adv = np.c_[rng.uniform(0.5, 1.0, 100), rng.uniform(0.0, 0.3, 100)]  # only the first detector tells
    params = joint.fit(np.r_[clean, adv], np.r_[np.zeros(200), np.ones(100)], clean, 0.01,
                       ["nonalnum", "speaker_tag"], [detectors.load(n).identity() for n in ("nonalnum", "speaker_tag")])
    assert params["coef"][0] > abs(params["coef"][1])
    assert np.mean(joint.predict(params, clean) >= params["threshold"]) <= 0.01  # the budget holds on its data
    assert np.mean(joint.predict(params, adv) >= params["threshold"]) > 0.9
    path = tmp_path / "joint.json"
    joint.save(params, path)
    assert not path.read_bytes().startswith(b"\x80")  # JSON, not a pickle
    d = detectors.load("joint", model=path)
    assert d.threshold == params["threshold"] and d.threshold_source == "fitted"
    row = d.analyze([Sample(id="a", task="dialogue", response="~&;$}%( ok", context=("hi",))])[0]
    assert set(row["features"]) == {"nonalnum", "speaker_tag"} and row["suspicion"] >= d.threshold
    assert "joint" not in detectors.names()
    # the standardization is part of the identity: a model with the same weights and another
    # mean moves every suspicion, so its saved suspicions must not be reused
    shifted = {**params, "mean": [m + 0.1 for m in params["mean"]]}
    joint.save(shifted, tmp_path / "shifted.json")
    assert detectors.load("joint", model=tmp_path / "shifted.json").identity() != d.identity()


def test_leave_one_family_out_never_fits_on_the_family_it_tests() -> None:
    from robusteval.detectors import joint

    rng = np.random.default_rng(1)
    clean = rng.uniform(0.0, 0.2, size=(300, 2))
    attacks = {"a": np.c_[rng.uniform(0.6, 1.0, 50), rng.uniform(0.0, 0.2, 50)],
               "b": np.c_[rng.uniform(0.6, 1.0, 50), rng.uniform(0.0, 0.2, 50)],
               "c": np.c_[rng.uniform(0.0, 0.2, 50), rng.uniform(0.6, 1.0, 50)]}  # the only one on detector 2
    out = joint.leave_one_family_out(clean[:150], clean[150:], attacks, 0.01, ["x", "y"], ["", ""])
    assert out["a"]["detection"]["rate"] > 0.9 and out["b"]["detection"]["rate"] > 0.9
    assert out["c"]["coef"]["y"] < out["a"]["coef"]["y"]  # without c, detector 2 carries no weight
    assert out["c"]["detection"]["rate"] < out["a"]["detection"]["rate"]
    # with conversations: the same counts, intervals that resample them (10 texts a conversation)
    grouped = joint.leave_one_family_out(clean[:150], clean[150:], attacks, 0.01, ["x", "y"], ["", ""],
                                         [f"d{i // 10}" for i in range(150)],
                                         {f: [f"{f}{i // 10}" for i in range(50)] for f in attacks})
    for f in attacks:
        for k in ("detection", "fpr"):
            assert grouped[f][k]["flagged"] == out[f][k]["flagged"] and grouped[f][k]["n"] == out[f][k]["n"]
            assert out[f][k]["ci_method"] == "wilson" and grouped[f][k]["ci_method"] == "cluster-bootstrap"
    with pytest.raises(RobustevalError, match="both clean"):
        joint.fit(clean, np.zeros(300), clean, 0.01, ["x", "y"], ["", ""])


def test_the_joint_threshold_is_cross_fitted_by_conversation() -> None:
    """With the clean texts' conversations, each clean calibration text is scored by a model
    fitted without the clean texts of its conversation (and the rest of its fold; every attack
    text is in every fit), and the threshold is read from those out-of-fold scores; the
    in-sample threshold is recorded beside it. The clean rows are found wherever they are in
    the features, and any hashable conversation keys work. With one conversation there is
    nothing to cross-fit: the in-sample threshold, said so."""
    from robusteval.detectors import joint
    from robusteval.detectors.calibrate import threshold_for

    rng = np.random.default_rng(2)
    clean = rng.uniform(0.0, 0.4, size=(120, 2))
    adv = np.c_[rng.uniform(0.3, 1.0, 60), rng.uniform(0.0, 0.5, 60)]
    x, y = np.r_[clean, adv], np.r_[np.zeros(120), np.ones(60)]
    # 12 conversations, interleaved; out_of_fold codes them in sorted order, so GroupKFold on the
    # names themselves (below) makes the same folds
    groups = [f"c{i % 12}" for i in range(120)]
    scores, k = joint.out_of_fold(x, y, groups, folds=4)
    assert k == 4 and scores.shape == (120,)
    from sklearn.model_selection import GroupKFold

    # rebuild the model that scored each fold: fitted on the other folds' clean rows and every attack
    for train, test in GroupKFold(n_splits=4).split(clean, groups=groups):
        assert not {groups[j] for j in train} & {groups[j] for j in test}
        rows = np.r_[train, np.arange(120, 180)]
        expected = joint.predict(joint._logistic(x[rows], y[rows], 0), clean[test])
        assert np.allclose(scores[test], expected)
    # attacks first and the conversations as tuples: the same clean rows, the same folds, the same scores
    shuffled, _ = joint.out_of_fold(np.r_[adv, clean], np.r_[np.ones(60), np.zeros(120)],
                                    [("d", g) for g in groups], folds=4)
    assert np.allclose(shuffled, scores, atol=1e-6)
    mixed, _ = joint.out_of_fold(x, y, [i % 12 if i % 2 else str(i % 12) for i in range(120)], folds=4)
    assert mixed.shape == (120,)  # keys of mixed types are coded by type name, then repr
    with pytest.raises(ValueError, match="at least 2 folds"):
        joint.out_of_fold(x, y, groups, folds=1)
    params = joint.fit(x, y, clean, 0.05, ["x", "y"], ["", ""], clean_groups=iter(groups), folds=4)
    assert params["threshold"] == threshold_for(scores, 0.05)
    assert np.mean(scores >= params["threshold"]) <= 0.05
    insample = joint.fit(x, y, clean, 0.05, ["x", "y"], ["", ""])
    assert params["calibration"] == {"method": "cross-fitted", "folds": 4, "conversations": 12,
                                     "in_sample_threshold": insample["threshold"], "confidence": None}
    assert insample["calibration"] == {"method": "in-sample", "in_sample_threshold": insample["threshold"],
                                       "confidence": None}
    # with a confidence the same out-of-fold scores give the bounded threshold (0 of 120 flagged
    # bounds at 2.5 %, 1 at 3.9 %, 2 at 5.2 %: at 5 % and 95 % it may flag 1, the point estimate 6)
    bounded = joint.fit(x, y, clean, 0.05, ["x", "y"], ["", ""], clean_groups=groups, folds=4, confidence=0.95)
    assert bounded["threshold"] == threshold_for(scores, 0.05, 0.95) > params["threshold"]
    assert int(np.sum(scores >= bounded["threshold"])) == 1
    assert bounded["calibration"]["confidence"] == 0.95 and bounded["coef"] == params["coef"]
    assert params["coef"] == insample["coef"]  # the model itself is fitted on everything either way
    one = joint.fit(x, y, clean, 0.05, ["x", "y"], ["", ""], clean_groups=["same"] * 120)
    assert one["threshold"] == insample["threshold"] and "fewer than two" in one["calibration"]["note"]
    with pytest.raises(RobustevalError, match="12 conversations for 120"):
        joint.out_of_fold(x, y, groups[:12])
    with pytest.raises(RobustevalError, match="clean rows of features"):
        joint.fit(x, y, clean[:60], 0.05, ["x", "y"], ["", ""], clean_groups=groups)


def test_joint_guard_file_errors_name_the_file(tmp_path) -> None:
    bad = tmp_path / "j.json"
    bad.write_text('{"format": "something else"}')
    with pytest.raises(DataFormatError, match=r"j\.json"):
        detectors.load("joint", model=bad)


def test_translated_clean_sets_keep_ids_apart_and_name_unknown_languages(data_dir) -> None:
    from robusteval.detectors.clean import load_clean

    from robusteval.errors import UnknownNameError

    en = load_clean("dailydialog-good", "all", data_dir)
    fr = load_clean("dailydialog-good:french", "all", data_dir)
    hi = load_clean("dailydialog-good:hindi", "heldout", data_dir)
    assert len(fr) == len(en) and fr[0].id == f"{en[0].id}/french" and fr[0].response != en[0].response
    assert 0 < len(hi) < len(en) and all(s.id.endswith("/hindi") for s in hi)
    # a translation is resampled with its English dialogue: the same conversations, not one per translated context
    assert [s.conversation_key() for s in fr] == [s.conversation_key() for s in en]
    with pytest.raises(UnknownNameError, match="klingon"):
        load_clean("dailydialog-good:klingon", "all", data_dir)
    with pytest.raises(UnknownNameError, match="unknown clean set"):
        load_clean("summeval-references:french", "all", data_dir)


def test_calibrate_groups_fits_each_task_and_language_once_and_floors_at_the_default() -> None:
    from robusteval.detectors.calibrate import calibrate_groups

    class Counting(HasX):
        calls = 0

        def _analyze(self, samples: list[Sample]) -> list[dict[str, Any]]:
            Counting.calls += len(samples)
            return super()._analyze(samples)

    en = [Sample(id=f"en{i}", task="dialogue", response="x " + "the cat is on the mat " * (i % 3 + 1))
          for i in range(60)]  # x share 1/7, 1/13, 1/19
    fr = [Sample(id=f"fr{i}", task="dialogue", response="le chat est sur le tapis et il dort bien")
          for i in range(60)]  # no x at all
    few = [Sample(id=f"s{i}", task="summarization", response="x x the summary") for i in range(5)]
    out = calibrate_groups([Counting()], {"en": en, "fr": fr, "few": few}, 0.01, min_n=50,
                           floor_at_default=True)
    assert Counting.calls == len(set(s.response for s in en + fr + few))  # one pass over the texts
    en_entry, fr_entry = out["groups"]["dialogue/en"]["detectors"]["has_x"], out["groups"]["dialogue/fr"]["detectors"]["has_x"]
    assert en_entry["n"] == 60 and en_entry["calibrated"] > 1 / 7 and en_entry["threshold"] == 0.5  # floored
    assert fr_entry["calibrated"] < 1e-300 and fr_entry["threshold"] == 0.5  # never fired: not "flag anything"
    assert out["groups_too_small"] == {"summarization/en": 5} and "summarization/en" not in out["groups"]
    pooled = out["detectors"]["has_x"]
    assert pooled["n"] == 125 and pooled["threshold"] > 0.5  # the 5 "x x" texts (0.5) are 4 %: above 1 %


def test_adversarial_samples_name_the_dataset_a_row_leaves_out() -> None:
    """Rows of two result files loaded with --dataset may not say their dataset: they get the
    one given, so the detection intervals keep two datasets' conversations apart."""
    from robusteval.detectors.calibrate import adversarial_samples

    from robusteval.attacks.base import ResultRow

    base = {"s1": Sample(id="s1", task="dialogue", context=("Привет", "مرحبا"), response="你好")}
    rows = [ResultRow("a", "f", "s1", "R-", "你好", "नमस्ते", "low").to_dict(),
            ResultRow("a", "f", "s1", "R-", "你好", "Bonjour", "low", dataset="other").to_dict(),
            ResultRow("a", "f", "s1", "R-", "你好", "你好", "low").to_dict()]  # unchanged: no text
    got = adversarial_samples(rows, base, "dailydialog-zhao")
    assert [(r["dataset"], s.response) for r, s in got] == [("dailydialog-zhao", "नमस्ते"), ("other", "Bonjour")]
    assert got[0][1].context == base["s1"].context


def test_summeval_good_is_every_system_summary_rated_at_least_4_on_every_aspect(data_dir) -> None:
    """The summarization counterpart of ``dailydialog-good``: SummEval system summaries (not the
    references) whose expert means are >= 4 on all four aspects; 561 of the 1,600, from 99 of
    the 100 documents, halved by document like every clean set."""
    from robusteval.detectors.clean import load_clean

    from robusteval import data

    good = load_clean("summeval-good", "all", data_dir)
    every = data.load("summeval", data_dir)
    want = [s.id for s in every if min(s.human.values()) >= 4.0]
    assert [s.id for s in good] == want and len(good) == 561
    assert {s.meta["doc_id"] for s in good} and len({s.meta["doc_id"] for s in good}) == 99
    assert all(len(s.human) == 4 and s.context and s.meta.get("system_id") for s in good)
    cal, held = load_clean("summeval-good", "calibration", data_dir), load_clean("summeval-good", "heldout", data_dir)
    assert len(cal) + len(held) == 561 and not {s.id for s in cal} & {s.id for s in held}


XDIAL = ("arabic", "chinese", "french", "german", "hindi", "japanese", "korean", "russian", "spanish")


@pytest.mark.parametrize("name", ["summeval-references", "summeval-good", "dailydialog-good",
                                  "usr-topicalchat-ground-truth", "quickstart-references",
                                  *(f"dailydialog-good:{lang}" for lang in XDIAL)])
def test_clean_halves_never_share_a_conversation(data_dir, name) -> None:
    """A held-out false-positive rate is measured on dialogues and documents the thresholds never
    saw: every text of one conversation (the replies to one dialogue, the references and good
    summaries of one document) falls on one side, and a translation on its English side. Checked
    independently of the hash: no held-out context continues or is continued by a calibration
    context (one dialogue's growing prefixes), and no document is on both sides."""
    from robusteval.detectors.clean import load_clean

    cal, held = load_clean(name, "calibration", data_dir), load_clean(name, "heldout", data_dir)
    assert cal and held and len(cal) + len(held) == len(load_clean(name, "all", data_dir))
    fitted = {s.context for s in cal}
    for s in held:
        k = len(s.context)
        assert not any(c[:k] == s.context or s.context[:len(c)] == c for c in fitted if c), s.id
    if name.startswith("summeval"):
        assert not {s.meta["doc_id"] for s in cal} & {s.meta["doc_id"] for s in held}
    if ":" in name:
        english = {s.id for s in load_clean("dailydialog-good", "heldout", data_dir)}
        assert {s.id.rsplit("/", 1)[0] for s in held} == english


# -- tables keyed by detector name, saved suspicions keyed by what a detector reads ----------
class EchoesContext(Detector):
    """Suspicion 1 when the response repeats the last context turn."""

    name: ClassVar[str] = "echoes_context"
    family: ClassVar[str] = "test"
    default_threshold: ClassVar[float] = 0.5
    reads: ClassVar[tuple[str, ...]] = ("response", "context")

    def _analyze(self, samples: list[Sample]) -> list[dict[str, Any]]:
        return [{"suspicion": float(bool(s.context) and s.response == s.context[-1])} for s in samples]


def test_two_detectors_of_one_name_are_refused_everywhere_they_would_share_a_table() -> None:
    """The thresholds, the suspicions and the flags are keyed by name while the FPR split
    counts every detector: a second ``has_x`` would overwrite the first's entries."""
    twins = [HasX(), HasX(threshold=0.2)]
    with pytest.raises(RobustevalError, match="'has_x' is listed 2 times"):
        detectors.guard(LengthMetric(), twins)
    with pytest.raises(RobustevalError, match="'has_x' is listed 2 times"):
        calibrate(twins, {"clean": SAMPLES})
    with pytest.raises(RobustevalError, match="'has_x' is listed 2 times") as refused:
        evaluate(twins, [], {"clean": SAMPLES})
    assert "list the subclass as module:Class" in str(refused.value)
    # the advice can be followed from a config: a subclass named apart, loaded by module:Class
    strict = detectors.load("test_guard:StrictHasX", threshold=0.2)
    guarded = detectors.guard(LengthMetric(), [HasX(), strict], policy="floor")
    assert [d.name for d in guarded.detectors] == ["has_x", "has_x_strict"]


class StrictHasX(HasX):
    """HasX run a second time with other settings, under a name of its own."""

    name: ClassVar[str] = "has_x_strict"


def test_a_saved_suspicion_is_keyed_by_everything_the_detector_reads(tmp_path) -> None:
    """Two samples with one id and one response after different contexts get their own
    suspicions, in one run and on resume (the key once hashed the response alone)."""
    from robusteval.detectors.calibrate import detect_logged

    from robusteval.results import JsonlLog

    echo = Sample(id="1", task="dialogue", response="thanks .", context=("thanks .",))
    other = Sample(id="1", task="dialogue", response="thanks .", context=("how are you ?",))
    assert EchoesContext().detect([echo, other]).tolist() == [1.0, 0.0]
    log = JsonlLog(tmp_path / "suspicion.jsonl", key="key")
    assert detect_logged(EchoesContext(), [echo, other], log).tolist() == [1.0, 0.0]
    resumed = JsonlLog(tmp_path / "suspicion.jsonl", key="key", resume=True)
    assert detect_logged(EchoesContext(), [other, echo], resumed).tolist() == [0.0, 1.0]
    assert len(resumed.rows) == 2
    french = Sample(id="1", task="dialogue", response="thanks .", context=("thanks .",), meta={"language": "fr"})
    assert EchoesContext().input_digest(french) != EchoesContext().input_digest(echo)  # the declared language


def test_the_roc_leaves_out_rows_without_a_new_text() -> None:
    """A search that changed nothing keeps its start text: it is no attacked text, in the
    compare ROC as in ``guard evaluate``."""
    from robusteval.attacks.base import ResultRow
    from robusteval.compare.guarding import adversarial_suspicion

    def row(adversarial: str, sample: str) -> dict[str, Any]:
        return ResultRow("a", "f", sample, "R-", "o", adversarial, "low", victim_before=50.0, victim_after=60.0,
                         success={"beats_reference": True}, context_id=sample,
                         meta={"guard": {"adversarial": {"suspicion": {"has_x": 0.9}}}}).to_dict()

    unchanged = row("o", "s1")
    susp, keys = adversarial_suspicion([row("x x", "s0"), unchanged], ["has_x"])
    assert susp["has_x"].tolist() == [0.9] and len(keys) == 1
