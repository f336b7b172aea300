"""[joint] A learned combination of every detector's suspicion, calibrated to one FPR budget.

Per-detector thresholds split the false-positive budget evenly (target / k): a detector that
ranks attacks well but saturates on some clean text (``generic``, ``parse_triple``) then gets a
threshold above 1 and never fires. The joint guard instead learns how much each detector's
suspicion says: a scikit-learn logistic regression (balanced class weights, standardized
features) over the k suspicions, fitted on adversarial texts (label 1) against the
calibration half of the clean sets (label 0), and one threshold on its output chosen so that at
most ``target_fpr`` of the clean calibration texts are flagged.

The threshold is *cross-fitted* when the clean texts' conversations are given (``clean_groups``):
the clean calibration texts are split into folds by conversation, each fold is scored by a model
fitted without its clean texts (every adversarial text is in every fit), and the threshold is
read from those out-of-fold scores, then applied to the model fitted on everything -- a
heuristic, not a guarantee. The in-sample threshold (read from the final model's scores on the
clean texts it was fitted against) is recorded beside it. In-sample, on the conversation halves,
the guard flagged 1.6-3.0 % of the held-out clean texts at a 1 % budget in four of five
leave-one-family-out fits; cross-fitted, 0.8-2.0 % (BENCHMARKS §9c).

Its detection on attacks it never saw is measured *leave one family out*
(:func:`leave_one_family_out`): for each attack family, the model is refitted and recalibrated
without that family's texts and tested on them; the false-positive rate is measured on the
held-out clean half. ``benchmarks/joint_guard.py`` runs it on the real data.

The fitted model is stored as JSON (the detectors, their settings, the standardization, the
coefficients and the threshold): never a pickle. ``load("joint", model="joint.json")``
rebuilds it and checks that every inner detector runs with the settings it was fitted with.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from robusteval.detectors.base import Detector, register_detector

from robusteval.errors import DataFormatError, RobustevalError
from robusteval.types import Sample

FORMAT = "robusteval.joint-guard/1"


FOLDS = 5  # clean calibration folds (by conversation) for the cross-fitted threshold


def _logistic(x: np.ndarray, y: np.ndarray, seed: int) -> dict[str, Any]:
    """Standardization and a balanced logistic regression on ``x`` [n, k], ``y`` (1 = adversarial)."""
    from sklearn.linear_model import LogisticRegression

    mean, std = x.mean(axis=0), x.std(axis=0)
    std = np.where(std > 0, std, 1.0)
    model = LogisticRegression(class_weight="balanced", max_iter=2000, random_state=seed)
    model.fit((x - mean) / std, y)
    return {"mean": mean.tolist(), "std": std.tolist(), "coef": model.coef_[0].tolist(),
            "intercept": float(model.intercept_[0])}


def out_of_fold(x: np.ndarray, y: np.ndarray, clean_groups: Sequence[str], folds: int = FOLDS,
                seed: int = 0) -> tuple[np.ndarray, int]:
    """The joint suspicion of each clean row of ``x`` (``y == 0``, in order) under a model fitted
    without its fold: the clean rows are split into ``folds`` folds by conversation
    (scikit-learn's ``GroupKFold``: a conversation is never on both sides), every adversarial row
    is in every fit. Returns the scores and the number of folds used (fewer where there are
    fewer conversations; 0, and no scores, with fewer than two)."""
    from sklearn.model_selection import GroupKFold

    from robusteval.stats import sorted_labels

    if folds < 2:
        raise ValueError(f"cross-fitting needs at least 2 folds, got {folds}")
    clean = np.flatnonzero(y == 0)
    keys = list(clean_groups)  # any hashable keys (str, tuples); GroupKFold gets integer codes
    if len(keys) != len(clean):
        raise RobustevalError(f"clean_groups names {len(keys)} conversations for {len(clean)} clean texts")
    # in sorted order, as GroupKFold orders string groups itself: the same folds either way
    code = {g: i for i, g in enumerate(sorted_labels(keys))}
    groups = np.array([code[g] for g in keys], dtype=int)
    k = min(folds, len(code))
    if k < 2:
        return np.zeros(0), 0
    adversarial = np.flatnonzero(y == 1)
    scores = np.empty(len(clean))
    for train, test in GroupKFold(n_splits=k).split(clean, groups=groups):
        rows = np.r_[clean[train], adversarial]
        scores[test] = predict(_logistic(x[rows], y[rows], seed), x[clean[test]])
    return scores, k


def fit(features: np.ndarray, labels: np.ndarray, clean_calibration: np.ndarray, target_fpr: float,
        names: Sequence[str], signatures: Sequence[str], seed: int = 0,
        clean_groups: Sequence[str] | None = None, folds: int = FOLDS,
        confidence: float | None = None) -> dict[str, Any]:
    """A logistic regression on ``features`` [n, k] (``labels`` 1 = adversarial) and its
    threshold: the smallest one flagging at most ``target_fpr`` of the clean calibration texts
    (with a ``confidence``: whose upper bound on that rate is at most ``target_fpr``,
    :func:`robusteval.detectors.calibrate.threshold_for`; the bound is exact only for scores
    independent of the fit, which neither in-sample nor out-of-fold scores are, so here it is a
    heuristic that makes the threshold stricter, measured in BENCHMARKS §9c).

    With ``clean_groups`` (the conversation of each clean row of ``features``, which must then be
    ``clean_calibration``), the threshold is read from out-of-fold scores (:func:`out_of_fold`);
    without, from the fitted model's own scores on ``clean_calibration`` (in-sample). Both are
    recorded under ``calibration``."""
    from robusteval.detectors.calibrate import threshold_for

    x = np.asarray(features, dtype=float)
    y = np.asarray(labels, dtype=int)
    if len(set(y.tolist())) != 2:
        raise RobustevalError("the joint guard needs both clean (0) and adversarial (1) texts to fit")
    params = {"format": FORMAT, "detectors": list(names), "signatures": list(signatures),
              **_logistic(x, y, seed), "target_fpr": target_fpr, "threshold": 1.0,
              "n_train": {"clean": int((y == 0).sum()), "adversarial": int((y == 1).sum())}}
    in_sample = threshold_for(predict(params, clean_calibration), target_fpr, confidence)
    calibration: dict[str, Any] = {"method": "in-sample", "in_sample_threshold": in_sample, "confidence": confidence}
    if clean_groups is not None:
        groups = list(clean_groups)  # read once: an iterator would be spent by the folds
        if not np.array_equal(x[y == 0], np.asarray(clean_calibration, dtype=float)):
            raise RobustevalError("cross-fitting needs the clean rows of features to be clean_calibration")
        scores, k = out_of_fold(x, y, groups, folds, seed)
        if k:
            calibration = {**calibration, "method": "cross-fitted", "folds": k,
                           "conversations": len(set(groups))}
            params["threshold"] = threshold_for(scores, target_fpr, confidence)
        else:
            calibration["note"] = "fewer than two conversations: the in-sample threshold is used"
    if calibration["method"] == "in-sample":
        params["threshold"] = in_sample
    params["calibration"] = calibration
    return params


def predict(params: dict[str, Any], features: np.ndarray) -> np.ndarray:
    """The joint suspicion in [0, 1] of each row of ``features``."""
    x = (np.asarray(features, dtype=float) - np.array(params["mean"])) / np.array(params["std"])
    z = x @ np.array(params["coef"]) + params["intercept"]
    return 1.0 / (1.0 + np.exp(-z))


def leave_one_family_out(clean_cal: np.ndarray, clean_held: np.ndarray, attacks: dict[str, np.ndarray],
                         target_fpr: float, names: Sequence[str], signatures: Sequence[str],
                         held_clusters: Sequence[str] | None = None,
                         attack_clusters: dict[str, Sequence[str]] | None = None,
                         cal_clusters: Sequence[str] | None = None,
                         confidence: float | None = None) -> dict[str, Any]:
    """Per family F: fit on the clean calibration texts and every family but F, then the
    detection rate on F and the false-positive rate on the held-out clean texts, each with its
    interval (:func:`robusteval.stats.flag_rate`), resampling ``held_clusters`` (each held-out
    text's conversation) and ``attack_clusters[F]`` (each attacked text's dataset and context)
    where given: texts of one conversation are not independent. With ``cal_clusters`` (each
    calibration text's conversation) the threshold is cross-fitted, with ``confidence`` bounded
    (:func:`fit`)."""
    from robusteval.stats import flag_rate

    out: dict[str, Any] = {}
    for family in sorted(attacks):
        others = [v for f, v in attacks.items() if f != family and len(v)]
        if not others:
            continue
        adv = np.concatenate(others)
        params = fit(np.concatenate([clean_cal, adv]), np.r_[np.zeros(len(clean_cal)), np.ones(len(adv))],
                     clean_cal, target_fpr, names, signatures, clean_groups=cal_clusters, confidence=confidence)
        out[family] = {"detection": flag_rate(predict(params, attacks[family]) >= params["threshold"],
                                              (attack_clusters or {}).get(family)),
                       "fpr": flag_rate(predict(params, clean_held) >= params["threshold"], held_clusters),
                       "threshold": params["threshold"], "calibration": params["calibration"],
                       "coef": dict(zip(names, params["coef"], strict=True))}
    return out


def features_of(detectors: Sequence[Detector], samples: Sequence[Sample]) -> np.ndarray:
    """[n, k] suspicions of ``detectors`` on ``samples``."""
    if not samples:
        return np.zeros((0, len(detectors)))
    return np.stack([d.detect(samples) for d in detectors], axis=1)


def save(params: dict[str, Any], path: str | os.PathLike[str]) -> None:
    Path(path).write_text(json.dumps(params, indent=1), encoding="utf-8")


def read(path: str | os.PathLike[str]) -> dict[str, Any]:
    from robusteval.results import read_json

    p = Path(path)
    params = read_json(p, "joint guard model not found (fit one with benchmarks/joint_guard.py)")
    if not isinstance(params, dict) or params.get("format") != FORMAT:
        raise DataFormatError(p, f"not a joint guard model ({FORMAT})")
    return params


@register_detector
class JointGuard(Detector):
    """Logistic regression over every detector's suspicion, one FPR budget (issue 14)."""

    name: ClassVar[str] = "joint"
    family: ClassVar[str] = "learned"
    source: ClassVar[str] = "robusteval: a learned combination of the detectors above (scikit-learn)"
    default_threshold: ClassVar[float] = 0.5
    listed: ClassVar[bool] = False  # built from a fitted model file, so not among the default detectors

    def __init__(self, model: str | os.PathLike[str] | dict[str, Any] | None = None,
                 threshold: float | None = None) -> None:
        if model is None:
            raise RobustevalError("the joint detector needs model= (a JSON file written by fit/save)")
        self.params = read(model) if not isinstance(model, dict) else model
        self.model_path = None if isinstance(model, dict) else str(model)
        super().__init__(self.params["threshold"] if threshold is None else threshold)
        self.threshold_source = "fitted" if threshold is None else "argument"
        from robusteval import detectors

        self.inner = [detectors.load(n) for n in self.params["detectors"]]
        for d, sig in zip(self.inner, self.params["signatures"], strict=True):
            if d.identity() != sig:
                raise RobustevalError(f"joint guard: {d.name} was fitted with settings {sig!r} but runs with "
                                      f"{d.identity()!r}")

    def signature(self) -> str:
        """The fitted model: its features in order, their standardization (mean, std) and the
        weights, each of which moves the suspicion."""
        def nums(key: str) -> str:
            return ",".join(f"{c:.6g}" for c in self.params[key])

        return (f"features={'+'.join(self.params['detectors'])},mean={nums('mean')},std={nums('std')},"
                f"coef={nums('coef')},b={self.params['intercept']:.6g}")

    def _analyze(self, samples: list[Sample]) -> list[dict[str, Any]]:
        x = features_of(self.inner, samples)
        p = predict(self.params, x)
        return [{"suspicion": float(v), "features": dict(zip(self.params["detectors"], row.tolist(), strict=True))}
                for v, row in zip(p, x, strict=True)]
