"""guard(): policies, details in outputs, thresholds; calibration and evaluation."""

from __future__ import annotations

import json
from typing import Any, ClassVar

import numpy as np
import pytest
from robusteval.detectors.base import Detector
from robusteval.detectors.calibrate import calibrate, evaluate, threshold_for
from robusteval.detectors.guarded import GuardRejection

from robusteval import Sample, detectors, metrics
from robusteval.attacks.victim import CachedVictim
from robusteval.metrics.base import Metric


class LengthMetric(Metric):
    name: ClassVar[str] = "length"

    def _score(self, samples: list[Sample]) -> np.ndarray:
        return np.array([min(100.0, 10.0 * len(s.response.split())) for s in samples])


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
                 "suspicion": {"has_x": 0.5}}
    assert g.report()["guard"]["flagged"] == {"has_x": 2, "any": 2}


def test_penalize_compounds_per_flagging_detector() -> None:
    g = detectors.guard(LengthMetric(), [HasX(), HasX(threshold=0.9)], policy="penalize", penalty=0.5)
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
