"""[joint] A learned combination of every detector's suspicion, calibrated to one FPR budget.

Per-detector thresholds split the false-positive budget evenly (target / k): a detector that
ranks attacks well but saturates on some clean text (``generic``, ``parse_triple``) then gets a
threshold above 1 and never fires. The joint guard instead learns how much each detector's
suspicion says: a scikit-learn logistic regression (balanced class weights, standardized
features) over the k suspicions, fitted on adversarial texts (label 1) against the
calibration half of the clean sets (label 0), and one threshold on its output chosen so that at
most ``target_fpr`` of the clean calibration texts are flagged.

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


def fit(features: np.ndarray, labels: np.ndarray, clean_calibration: np.ndarray, target_fpr: float,
        names: Sequence[str], signatures: Sequence[str], seed: int = 0) -> dict[str, Any]:
    """A logistic regression on ``features`` [n, k] (``labels`` 1 = adversarial) and its
    threshold: the smallest one flagging at most ``target_fpr`` of ``clean_calibration`` [m, k]."""
    from robusteval.detectors.calibrate import threshold_for
    from sklearn.linear_model import LogisticRegression

    x = np.asarray(features, dtype=float)
    y = np.asarray(labels, dtype=int)
    if len(set(y.tolist())) != 2:
        raise RobustevalError("the joint guard needs both clean (0) and adversarial (1) texts to fit")
    mean, std = x.mean(axis=0), x.std(axis=0)
    std = np.where(std > 0, std, 1.0)
    model = LogisticRegression(class_weight="balanced", max_iter=2000, random_state=seed)
    model.fit((x - mean) / std, y)
    params = {"format": FORMAT, "detectors": list(names), "signatures": list(signatures),
              "mean": mean.tolist(), "std": std.tolist(), "coef": model.coef_[0].tolist(),
              "intercept": float(model.intercept_[0]), "target_fpr": target_fpr, "threshold": 1.0,
              "n_train": {"clean": int((y == 0).sum()), "adversarial": int((y == 1).sum())}}
    params["threshold"] = threshold_for(predict(params, clean_calibration), target_fpr)
    return params


def predict(params: dict[str, Any], features: np.ndarray) -> np.ndarray:
    """The joint suspicion in [0, 1] of each row of ``features``."""
    x = (np.asarray(features, dtype=float) - np.array(params["mean"])) / np.array(params["std"])
    z = x @ np.array(params["coef"]) + params["intercept"]
    return 1.0 / (1.0 + np.exp(-z))


def leave_one_family_out(clean_cal: np.ndarray, clean_held: np.ndarray, attacks: dict[str, np.ndarray],
                         target_fpr: float, names: Sequence[str], signatures: Sequence[str],
                         held_clusters: Sequence[str] | None = None,
                         attack_clusters: dict[str, Sequence[str]] | None = None) -> dict[str, Any]:
    """Per family F: fit on the clean calibration texts and every family but F, then the
    detection rate on F and the false-positive rate on the held-out clean texts, each with its
    interval (:func:`robusteval.stats.flag_rate`), resampling ``held_clusters`` (each held-out
    text's conversation) and ``attack_clusters[F]`` (each attacked text's dataset and context)
    where given: texts of one conversation are not independent."""
    from robusteval.stats import flag_rate

    out: dict[str, Any] = {}
    for family in sorted(attacks):
        others = [v for f, v in attacks.items() if f != family and len(v)]
        if not others:
            continue
        adv = np.concatenate(others)
        params = fit(np.concatenate([clean_cal, adv]), np.r_[np.zeros(len(clean_cal)), np.ones(len(adv))],
                     clean_cal, target_fpr, names, signatures)
        out[family] = {"detection": flag_rate(predict(params, attacks[family]) >= params["threshold"],
                                              (attack_clusters or {}).get(family)),
                       "fpr": flag_rate(predict(params, clean_held) >= params["threshold"], held_clusters),
                       "threshold": params["threshold"], "coef": dict(zip(names, params["coef"], strict=True))}
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
        return f"coef={','.join(f'{c:.6g}' for c in self.params['coef'])},b={self.params['intercept']:.6g}"

    def _analyze(self, samples: list[Sample]) -> list[dict[str, Any]]:
        x = features_of(self.inner, samples)
        p = predict(self.params, x)
        return [{"suspicion": float(v), "features": dict(zip(self.params["detectors"], row.tolist(), strict=True))}
                for v, row in zip(p, x, strict=True)]
