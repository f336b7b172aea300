"""The guard side of a comparison: detectors with calibrated thresholds, false-positive
rates on held-out clean text, and ROC curves of each detector (clean vs adversarial text)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from robusteval.compare.config import CompareConfig
from robusteval.results import JsonlLog, write_json


def build_detectors(cfg: CompareConfig, out: Path, log: JsonlLog, data_dir: str | None) -> tuple[list[Any], str]:
    """The configured detectors with thresholds applied; returns them and the thresholds file
    (the given one, or ``<out>/thresholds.json`` calibrated on the calibration half of
    ``guard.calibrate.clean``)."""
    from robusteval import detectors
    from robusteval.detectors.calibrate import calibrate
    from robusteval.detectors.clean import load_clean

    spec = cfg.guard
    dets = detectors.resolve(spec.detectors)
    if spec.thresholds:
        path = str(spec.thresholds)
    else:
        path = str(out / "thresholds.json")
        if not Path(path).is_file():  # else: calibrated by this run before it was killed (--resume)
            clean = {n: load_clean(n, "calibration", data_dir or cfg.data_dir) for n in spec.calibrate["clean"]}
            table = calibrate(dets, clean, float(spec.calibrate.get("target_fpr", 0.01)),
                              combined=bool(spec.calibrate.get("combined", True)), log=log)
            write_json(path, table)
    return detectors.resolve(dets, path), path


def clean_suspicion(dets: Sequence[Any], cfg: CompareConfig, log: JsonlLog,
                    data_dir: str | None) -> dict[str, dict[str, np.ndarray]]:
    """Suspicion of every detector on the held-out half of each ``fpr_sets`` clean set."""
    from robusteval.detectors.calibrate import detect_logged
    from robusteval.detectors.clean import load_clean

    result: dict[str, dict[str, np.ndarray]] = {}
    for name in cfg.guard.fpr_sets:
        samples = load_clean(name, "heldout", data_dir or cfg.data_dir)
        result[name] = {d.name: detect_logged(d, samples, log, desc=f"{d.name} on {name}") for d in dets}
    return result


def false_positive_rates(dets: Sequence[Any], clean: dict[str, dict[str, np.ndarray]]) -> dict[str, Any]:
    """Per detector and for the union (``combined``): flagged / n per clean set and pooled,
    with intervals (:func:`robusteval.stats.flag_rate`)."""
    from robusteval.stats import flag_rate

    out: dict[str, Any] = {}
    names = [d.name for d in dets] + ["combined"]
    for name in names:
        per: dict[str, Any] = {}
        pooled: list[bool] = []
        for set_name, susp in clean.items():
            if name == "combined":
                flags = np.any(np.stack([susp[d.name] >= d.threshold for d in dets]), axis=0)
            else:
                d = next(x for x in dets if x.name == name)
                flags = susp[name] >= d.threshold
            pooled += flags.tolist()
            per[set_name] = flag_rate(flags)
        per["pooled"] = flag_rate(pooled)
        out[name] = per
    return out


def roc(negatives: np.ndarray, positives: np.ndarray, max_points: int = 200) -> dict[str, Any]:
    """ROC of a suspicion score (higher = more suspicious): points (FPR, TPR) from the
    strictest threshold to the loosest, and the area under the curve (ties count half)."""
    neg, pos = np.asarray(negatives, float), np.asarray(positives, float)
    if not len(neg) or not len(pos):
        return {"auc": None, "points": [], "n_clean": len(neg), "n_adversarial": len(pos)}
    cuts = np.unique(np.concatenate([neg, pos]))[::-1]
    pts = [(0.0, 0.0)] + [(float(np.mean(neg >= c)), float(np.mean(pos >= c))) for c in cuts]
    if pts[-1] != (1.0, 1.0):
        pts.append((1.0, 1.0))
    xs, ys = np.array([p[0] for p in pts]), np.array([p[1] for p in pts])
    auc = float(np.sum((xs[1:] - xs[:-1]) * (ys[1:] + ys[:-1]) / 2))
    if len(pts) > max_points:  # keep the curve's shape, drop interior points evenly
        keep = np.unique(np.linspace(0, len(pts) - 1, max_points).round().astype(int))
        pts = [pts[i] for i in keep]
    return {"auc": round(auc, 6), "points": [[round(x, 6), round(y, 6)] for x, y in pts],
            "n_clean": len(neg), "n_adversarial": len(pos)}


def adversarial_suspicion(rows: Sequence[dict[str, Any]], names: Sequence[str]) -> dict[str, np.ndarray]:
    """Each detector's suspicion of the adversarial texts of R- results, read from the guard
    details the attack runner stored in the rows of a guarded victim."""
    out: dict[str, list[float]] = {n: [] for n in names}
    from robusteval.asr import counted

    for r in counted(rows):
        if r.direction != "R-":
            continue
        adv = (r.meta.get("guard") or {}).get("adversarial")
        if not adv:
            continue
        for n in names:
            out[n].append(float(adv["suspicion"][n]))
    return {n: np.array(v, dtype=float) for n, v in out.items()}
