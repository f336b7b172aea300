"""The committee metric and detector (issue 16, item 3): median of the members, their
disagreement, abstention counted, and a guard that flags on disagreement."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from toy import LengthMetric, ScriptedLLM

from robusteval import Sample, detectors, metrics
from robusteval.errors import InputError
from robusteval.metrics.committee import Committee, spread
from robusteval.metrics.llm_judge import LLMJudge

ONE = Sample(id="one", task="dialogue", response="fine", context=("Hi",), reference="fine thanks")
TWO = Sample(id="two", task="dialogue", response="fine thanks", context=("Hi",), reference="fine thanks")


def jury(**options) -> Committee:
    """Three length judges at 5, 10 and 20 points per word: one word -> 5, 10, 20 (range 15);
    two words -> 10, 20, 40 (median 20, range 30, MAD 10)."""
    return Committee([LengthMetric(per_word=5), LengthMetric(per_word=10), LengthMetric(per_word=20)], **options)


def test_median_and_spread() -> None:
    assert jury().score([ONE, TWO]).tolist() == [10.0, 20.0]
    assert jury().disagreement([ONE, TWO]) == [15.0, 30.0]
    assert jury(spread="mad").disagreement([ONE, TWO]) == [5.0, 10.0]
    assert spread(np.array([[0.0, 50.0], [100.0, 50.0]]), "range").tolist() == [100.0, 0.0]


def test_disagreement_is_reported_or_abstained_and_counted() -> None:
    median = jury()
    assert median.score([ONE, TWO]).tolist() == [10.0, 20.0]  # reported only
    assert median.report()["fallbacks"] == {"disagreed": 1}
    abstain = jury(on_disagreement="abstain")
    assert abstain.score([ONE, TWO, TWO]).tolist() == [10.0, 0.0, 0.0]  # range 30 >= threshold 30
    assert abstain.report()["fallbacks"] == {"disagreed": 2, "abstained": 2}
    floor = jury(on_disagreement="abstain", abstain_score=25.0, threshold=40.0)
    assert floor.score([ONE, TWO]).tolist() == [10.0, 20.0] and floor.report()["fallbacks"] == {}
    assert jury(on_disagreement="abstain", threshold=15.0).score([ONE]).tolist() == [0.0]


def test_details_per_sample() -> None:
    rows = jury(on_disagreement="abstain").member_details([ONE, TWO])
    assert rows[1] == {"id": "two", "members": {"0:length": 10.0, "1:length": 20.0, "2:length": 40.0},
                       "median": 20.0, "spread": 30.0, "disagree": True, "score": 0.0}
    assert rows[0]["disagree"] is False and rows[0]["score"] == 10.0


def test_members_from_specs_several_templates_and_backends() -> None:
    low, high = ScriptedLLM(answer=lambda p: "Score: 20"), ScriptedLLM(answer=lambda p: "Score: 90")
    committee = metrics.load("committee", members=[
        {"template": "adveval-dialogue", "backend": low},                          # llm-judge options
        {"name": "llm-judge", "options": {"template": "adveval-dialogue", "backend": high}},
        {"name": "llm-judge", "template": "adveval-summary", "backend": high},      # options inline
        "rouge1",                                                                   # a metric name
    ], on_disagreement="abstain", abstain_score=5.0)
    assert [type(m).__name__ for m in committee.members][:3] == ["LLMJudge"] * 3
    assert committee.labels[0] == "0:llm-judge/adveval-dialogue" and committee.labels[3] == "3:rouge1"
    assert committee.requires_reference
    rows = committee.member_details([TWO])
    assert rows[0]["members"]["0:llm-judge/adveval-dialogue"] == 20.0 and rows[0]["spread"] == 80.0
    assert committee.score([TWO])[0] == 5.0 and committee.report()["fallbacks"]["abstained"] == 1
    assert len(committee.report()["members"]) == 4 and "isolation=" in committee.signature()
    with pytest.raises(InputError, match=r"sample 'n', field 'reference'"):
        committee.score([Sample(id="n", task="dialogue", response="x", context=("Hi",))])


def test_bad_configurations_are_refused() -> None:
    with pytest.raises(ValueError, match="at least two"):
        Committee([LengthMetric()])
    with pytest.raises(ValueError, match="on_disagreement"):
        jury(on_disagreement="vote")
    with pytest.raises(ValueError, match="threshold"):
        jury(spread="mad", threshold=60.0)
    with pytest.raises(TypeError, match="committee member"):
        Committee([LengthMetric(), 3])


# -- the detector ---------------------------------------------------------------------------
def test_detector_suspicion_is_the_normalized_spread() -> None:
    det = detectors.load("committee", committee=jury())
    assert det.detect([ONE, TWO]).tolist() == [0.15, 0.3]
    assert det.flags([ONE, TWO]).tolist() == [False, True] and det.threshold == pytest.approx(0.3)
    assert detectors.load("committee", committee=jury(threshold=20.0)).threshold == pytest.approx(0.2)
    mad = detectors.load("committee", committee=jury(spread="mad"))
    assert mad.detect([TWO]).tolist() == [0.2] and mad.threshold == pytest.approx(0.3)
    assert det.analyze([TWO])[0]["members"] == {"0:length": 10.0, "1:length": 20.0, "2:length": 40.0}
    assert "committee" not in detectors.names()  # needs members: not a default detector
    with pytest.raises(ValueError, match="members"):
        detectors.load("committee")


def test_guard_config_builds_the_detector_from_member_specs() -> None:
    a, b = ScriptedLLM(answer=lambda p: "Score: 30"), ScriptedLLM(answer=lambda p: "Score: 90")
    spec = {"name": "committee", "options": {"members": [{"template": "adveval-dialogue", "backend": a},
                                                         {"template": "adveval-dialogue", "backend": b}]}}
    (det,) = detectors.resolve([spec])
    assert det.detect([ONE])[0] == pytest.approx(0.6)
    guarded = detectors.guard(LLMJudge(backend=a, template="adveval-dialogue"), [spec], policy="floor")
    assert guarded.score([ONE])[0] == 0.0  # the jury splits by 60 points: floored


def test_guard_config_builds_a_normalized_committee_detector(tmp_path) -> None:
    """``normalize: quantile`` with a calibration file: members on scales 16x apart (1 and 16
    points per word) agree once each is read as its percentile among its calibration scores."""
    import json

    calib = tmp_path / "clean.jsonl"
    words = ["один", "两 个", "trois mots ici", "चार शब्द यहाँ हैं", "خمس كلمات هنا في النص", "one two three four five six"]
    calib.write_text("".join(json.dumps({"id": f"c{i}", "task": "dialogue", "response": w, "context": ["Hi"]},
                                        ensure_ascii=False) + "\n" for i, w in enumerate(words)), encoding="utf-8")
    members = [LengthMetric(per_word=1), LengthMetric(per_word=16)]
    three = replace(TWO, id="three", response="fine thanks mate")
    raw = detectors.resolve([{"name": "committee", "options": {"members": members}}])[0]
    norm = detectors.resolve([{"name": "committee", "options": {"members": members, "normalize": "quantile",
                                                               "calibration": str(calib)}}])[0]
    assert raw.detect([three])[0] == pytest.approx(0.45) and raw.flags([three])[0]  # 3 vs 48: the scales alone
    assert norm.detect([three])[0] == pytest.approx(0.0) and not norm.flags([three])[0]  # both at 41.7
    assert "normalize=quantile(6:" in norm.signature()
    with pytest.raises(ValueError, match="committee= given whole"):
        detectors.load("committee", committee=jury(), normalize="quantile", calibration=str(calib))


def test_a_committee_is_attacked_by_the_runner(tmp_path) -> None:
    """Regression: the runner asks a victim for per-sample guard ``details``; a committee's
    per-member breakdown once answered to that name and crashed every attack on a committee."""
    from robusteval import attacks
    from robusteval.attacks.runner import read_results, run_attacks

    run_attacks([ONE, TWO], [attacks.load("repeat-words")], jury(on_disagreement="abstain"),
                tmp_path / "results.jsonl", progress=False)
    rows, _ = read_results(tmp_path / "results.jsonl")
    assert len(rows) == 2 and all(r.outcome == "attacked" for r in rows)


def test_plain_functions_are_members() -> None:
    def half(predictions):
        return [50.0] * len(predictions)

    def ten_per_char(predictions):
        return [10.0 * len(p) for p in predictions]

    committee = metrics.load("committee", members=[half, ten_per_char, "rougeL"])
    assert committee.labels == ["0:half", "1:ten_per_char", "2:rougeL"]
    # "abc": 50, 30, 100 -> 50; "hello world": 50, 100 (110 clipped), 66.7 -> 66.7
    assert committee.compute(predictions=["abc", "hello world"], references=["abc", "hello"])["scores"] == \
        pytest.approx([50.0, 200 / 3])


# -- members on one scale (normalize="quantile") ------------------------------------------------
CALIBRATION = [Sample(id=f"cal{i}", task="dialogue", context=("Hi",), response=text)
               for i, text in enumerate(["Bonjour", "你好 世界", "مرحبا بك يا صديقي", "नमस्ते मेरे प्यारे दोस्त"])]


class Inverse(LengthMetric):
    """Ranks replies the other way round from length (a member that disagrees in earnest)."""

    name = "inverse"

    def _score(self, samples):
        return 100.0 - super()._score(samples)


def test_quantile_scale_is_the_interpolated_mid_rank_percentile_with_strict_tails() -> None:
    from robusteval.metrics.committee import quantile_scale

    ref = np.array([30.0, 10.0, 20.0, 20.0])  # any order
    # at 10: 0 below + 1 at -> 0.5 of 4; at 20: 1 below, 2 at -> 2 of 4; at 30: 3 below + 1 at -> 3.5 of 4;
    # 25 lies halfway between 20 (50) and 30 (87.5)
    got = quantile_scale(np.array([10.0, 15.0, 20.0, 25.0, 30.0]), ref)
    assert got.tolist() == [12.5, 31.25, 50.0, 68.75, 87.5]
    # beyond the calibration: exponential tails from the end mid-ranks, scale = the mean gap (10)
    tails = quantile_scale(np.array([-100.0, 0.0, 5.0, 35.0, 40.0, 1000.0]), ref)
    assert tails[2] == pytest.approx(12.5 * np.exp(-0.5)) and tails[4] == pytest.approx(100 - 12.5 * np.exp(-1.0))
    assert np.all(np.diff(tails) > 0) and 0.0 < tails[0] < tails[1] < 12.5 and 87.5 < tails[3] < tails[4] <= 100.0
    with pytest.raises(ValueError, match="two distinct"):
        quantile_scale(np.array([1.0]), np.array([2.0, 2.0]))


def test_calibration_fallbacks_are_reported_apart_from_the_scored_texts() -> None:
    def forty_per_word(predictions):
        return [40.0 * len(p.split()) for p in predictions]

    committee = Committee([LengthMetric(per_word=5), forty_per_word], normalize="quantile", calibration=CALIBRATION)
    one = Sample(id="one", task="dialogue", context=("Hi",), response="Salut")
    three = Sample(id="three", task="dialogue", context=("Hi",), response="Салют мой друг")
    with pytest.warns(UserWarning, match="outside 0-100"):
        committee.score([one])  # the calibration's two 4-word replies score 160: clipped while scaling
    report = committee.report()
    assert report["normalize"]["calibration_fallbacks"] == {"1:forty_per_word": {"clipped_to_0_100": 2}}
    assert report["members"][1]["fallbacks"] == {}  # the scored text (40 points) fell back nowhere
    with pytest.warns(UserWarning, match="outside 0-100"):
        committee.score([three])  # 120 points: the scored text's own fallback, counted on the member
    report = committee.report()
    assert report["members"][1]["fallbacks"] == {"clipped_to_0_100": 1}
    assert report["normalize"]["calibration_fallbacks"] == {"1:forty_per_word": {"clipped_to_0_100": 2}}


def test_calibration_fallbacks_of_a_wrapped_inner_metric_stay_apart_too() -> None:
    """A member that wraps another metric (smoothed, guarded) reports the inner metric's
    fallbacks as its own: those the calibration caused are moved apart as well."""
    from robusteval.metrics.base import Metric

    class Wrapper(Metric):
        name = "wrapper"

        def __init__(self, inner: Metric) -> None:
            super().__init__()
            self.metric = inner

        def _score(self, samples):
            return np.asarray(self.metric.score(samples), dtype=float)

        def report(self):
            inner = self.metric.report()
            return {**super().report(), "fallbacks": {**inner["fallbacks"], **dict(self.fallbacks)}}

    from robusteval.metrics.committee import build_member

    def forty_per_word(predictions):
        return [40.0 * len(p.split()) for p in predictions]

    wrapped = Wrapper(build_member(forty_per_word))  # inner: the 3- and 4-word calibration replies clip
    committee = Committee([LengthMetric(per_word=5), wrapped], normalize="quantile", calibration=CALIBRATION)
    with pytest.warns(UserWarning, match="outside 0-100"):
        committee.score([Sample(id="one", task="dialogue", context=("Hi",), response="Salut")])
    report = committee.report()
    assert report["normalize"]["calibration_fallbacks"] == {"1:wrapper": {"clipped_to_0_100": 2}}
    assert report["members"][1]["fallbacks"] == {}


class CountingLength(LengthMetric):
    """Counts the texts it scores (a copy sent to a worker carries the count it had)."""

    name = "counting-length"

    def __init__(self) -> None:
        super().__init__()
        self.texts_scored = 0

    def _score(self, samples):
        self.texts_scored += len(samples)
        return super()._score(samples)


def test_a_committee_rebuilt_from_its_recipe_takes_the_drivers_scales() -> None:
    """What a Ray worker gets: the recipe, sent (reduced, as the transport reduces it) with the
    scales the driver fitted, so the worker's committee scores the calibration set no second
    time and scales alike. ``copy.deepcopy`` goes through the same ``__reduce__`` as Ray's
    serializer, without writing anything."""
    import copy

    from robusteval.execution.base import _BUILT, shippable, unship

    committee = metrics.load("committee", members=[CountingLength(), Inverse()], normalize="quantile",
                             calibration=CALIBRATION)
    sample = Sample(id="x", task="dialogue", context=("Hi",), response="Привет, как дела?")
    sent = copy.deepcopy(shippable(committee))  # the driver fits its scales while sending
    assert committee.members[0].texts_scored == len(CALIBRATION)
    assert sent.state["reference"] == [ref.tolist() for ref in committee._scales()]
    try:
        worker = unship(sent)
        assert worker is not committee
        before = worker.members[0].texts_scored  # the count the copy was sent with
        assert worker.score([sample]) == committee.score([sample])
        assert worker.members[0].texts_scored == before + 1  # the sample only: no calibration scoring
        # scales fitted on another calibration set are refused
        other = Committee([CountingLength(), Inverse()], normalize="quantile", calibration=CALIBRATION[:3])
        with pytest.raises(ValueError, match="another calibration"):
            other.load_fitted_state(sent.state)
    finally:
        _BUILT.pop(sent.token, None)
    # a committee without normalization sends no state
    plain = metrics.load("committee", members=[LengthMetric(), Inverse()])
    assert copy.deepcopy(shippable(plain)).state is None


def test_members_on_different_scales_agree_once_normalized() -> None:
    reply = Sample(id="ru", task="dialogue", context=("Hi",), response="Привет мир")  # two words
    raw = jury(on_disagreement="abstain")
    assert raw.score([reply]).tolist() == [0.0]  # 10, 20, 40 points: a 30-point range abstains
    scaled = jury(on_disagreement="abstain", normalize="quantile", calibration=CALIBRATION)
    # calibration lengths 1, 2, 4, 4 words: two words are above 1 reply and level with 1, (1 + 0.5) / 4
    assert scaled.member_details([reply])[0]["members"] == {"0:length": 37.5, "1:length": 37.5, "2:length": 37.5}
    assert scaled.score([reply]).tolist() == [37.5] and scaled.disagreement([reply]) == [0.0]
    assert scaled.report()["normalize"] == {"method": "quantile", "calibration_n": 4, "calibration_fallbacks": {}}
    split = Committee([LengthMetric(per_word=5), Inverse(per_word=5)], on_disagreement="abstain",
                      normalize="quantile", calibration=CALIBRATION)
    long = Sample(id="fr", task="dialogue", context=("Hi",), response="Oui , merci beaucoup mon ami")
    # 30 points is past the length member's top score (20: mid-rank 75), 70 below the inverse one's lowest
    # (80: mid-rank 25); both tails have scale 7.5 (the mean gap between distinct scores)
    members = split.member_details([long])[0]["members"]
    assert members["0:length"] == pytest.approx(100 - 25 * np.exp(-10 / 7.5))
    assert members["1:inverse"] == pytest.approx(25 * np.exp(-10 / 7.5))
    assert split.score([long]).tolist() == [0.0] and split.report()["fallbacks"]["abstained"] == 1


def test_the_calibration_is_scored_once_and_enters_the_signature() -> None:
    calls = []

    class Counting(LengthMetric):
        def _score(self, samples):
            calls.append(len(samples))
            return super()._score(samples)

    c = Committee([Counting(per_word=5), Counting(per_word=10)], normalize="quantile", calibration=CALIBRATION)
    c.score([ONE]), c.score([TWO])
    assert calls == [1, 1, 4, 4, 1, 1]  # the two members on ONE, on the calibration once, then on TWO
    other = Committee([LengthMetric(per_word=5), LengthMetric(per_word=10)], normalize="quantile",
                      calibration=CALIBRATION[:3])
    same = Committee([LengthMetric(per_word=5), LengthMetric(per_word=10)], normalize="quantile",
                     calibration=list(CALIBRATION))
    plain = Committee([LengthMetric(per_word=5), LengthMetric(per_word=10)])
    assert len({other.signature(), same.signature(), plain.signature()}) == 3
    assert same.signature() == Committee([LengthMetric(per_word=5), LengthMetric(per_word=10)], normalize="quantile",
                                         calibration=CALIBRATION).signature()


def test_the_signature_follows_every_field_of_the_calibration() -> None:
    def sig(cal):
        return Committee([LengthMetric(per_word=5), LengthMetric(per_word=10)], normalize="quantile",
                         calibration=cal).signature()

    base = sig(CALIBRATION)
    turn = [replace(CALIBRATION[0], context=("Salut",)), *CALIBRATION[1:]]
    answer = [replace(CALIBRATION[0], answer="oui"), *CALIBRATION[1:]]
    as_dicts = [s.to_dict() for s in CALIBRATION]
    assert len({base, sig(turn), sig(answer)}) == 3 and sig(as_dicts) == base


def test_bad_normalization_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="needs calibration"):
        jury(normalize="quantile")
    with pytest.raises(ValueError, match="only used with normalize='quantile'"):
        jury(calibration=CALIBRATION)
    with pytest.raises(ValueError, match="normalize must be one of"):
        jury(normalize="zscore")
    with pytest.raises(ValueError, match=r"non-empty list of samples.*got an empty list"):
        jury(normalize="quantile", calibration=[]).score([ONE])
    with pytest.raises(ValueError, match="got int"):
        jury(normalize="quantile", calibration=[CALIBRATION[0], 3]).score([ONE])
    blank = [*CALIBRATION, Sample(id="cal-blank", task="dialogue", context=("Hi",), response="\u200b ")]
    with pytest.raises(InputError, match=r"cal-blank.*calibration sample"):
        jury(normalize="quantile", calibration=blank).score([ONE])
    same = [Sample(id=f"w{i}", task="dialogue", context=("Hi",), response=w) for i, w in enumerate(["一", "二"])]
    with pytest.raises(ValueError, match="member 0:length gave every calibration sample the same score"):
        jury(normalize="quantile", calibration=same).score([ONE])
