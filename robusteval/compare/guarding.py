"""The guard side of a comparison: detectors with calibrated thresholds, false-positive
rates on held-out clean text, and ROC curves of each detector (clean vs adversarial text)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from robusteval.compare.config import CompareConfig
from robusteval.results import JsonlLog, write_json


def build_detectors(cfg: CompareConfig, out: Path, log: JsonlLog, data_dir: str | None) -> tuple[list[Any], str | None]:
    """The configured detectors with thresholds applied; returns them and the thresholds file
    (the given one, or ``<out>/thresholds.json`` calibrated on the calibration half of
    ``guard.calibrate.clean``), or None with ``thresholds: shipped``: the detectors then keep
    their defaults and look up the package's threshold per sample (task and language)."""
    from robusteval import detectors
    from robusteval.config.compare import SHIPPED
    from robusteval.detectors.calibrate import calibrate
    from robusteval.detectors.clean import load_clean

    spec = cfg.guard
    dets = detectors.resolve(spec.detectors)
    if spec.thresholds == SHIPPED:
        return dets, None
    if spec.thresholds:
        path = str(spec.thresholds)
    else:
        path = str(out / "thresholds.json")
        if not Path(path).is_file():  # else: calibrated by this run before it was killed (--resume)
            clean = {n: load_clean(n, "calibration", data_dir or cfg.data_dir) for n in spec.calibrate["clean"]}
            table = calibrate(dets, clean, float(spec.calibrate.get("target_fpr", 0.01)),
                              combined=bool(spec.calibrate.get("combined", True)), log=log,
                              confidence=spec.calibrate.get("confidence"))
            write_json(path, table)
    return detectors.resolve(dets, path), path


def thresholds_source(dets: Sequence[Any], path: str | None, out: Path) -> tuple[dict[str, float | str], str]:
    """The report's record of where the thresholds came from: per detector its number, or, for
    a detector left at its default (``thresholds: shipped``, an ``options.threshold`` aside),
    the shipped per-group lookup with the class default it falls back to; and the file
    (relative to the run folder if inside it), or the shipped table and its version."""
    from robusteval.detectors.defaults import FILE, version

    per: dict[str, float | str] = {d.name: f"{SHIPPED_LABEL}, else {float(d.threshold):.6g}"
                                   if d.threshold_source == "default" else float(d.threshold) for d in dets}
    if path is None:
        return per, f"robusteval/resources/{FILE} (shipped defaults, version {version()})"
    return per, str(Path(path).relative_to(out)) if Path(path).is_relative_to(out) else path


SHIPPED_LABEL = "shipped default per task and language"


Clean = dict[str, dict[str, tuple[np.ndarray, np.ndarray]]]
Clusters = dict[str, list[str]]


def clean_suspicion(dets: Sequence[Any], cfg: CompareConfig, log: JsonlLog,
                    data_dir: str | None) -> tuple[Clean, Clusters]:
    """Per ``fpr_sets`` clean set and detector: the suspicion of each text of the set's held-out
    half and the threshold that applies to it (one number for calibrated thresholds; the shipped
    defaults differ by the text's task and language); and per set each text's conversation
    (:meth:`Sample.conversation_key`: a document's references, a context's replies), which the
    false-positive intervals resample."""
    from robusteval.detectors.calibrate import detect_logged
    from robusteval.detectors.clean import load_clean

    result: Clean = {}
    clusters: Clusters = {}
    for name in cfg.guard.fpr_sets:
        samples = load_clean(name, "heldout", data_dir or cfg.data_dir)
        result[name] = {d.name: (detect_logged(d, samples, log, desc=f"{d.name} on {name}"), d.thresholds(samples))
                        for d in dets}
        clusters[name] = [s.conversation_key() for s in samples]
    return result, clusters


def false_positive_rates(dets: Sequence[Any], clean: Clean, clusters: Clusters | None = None) -> dict[str, Any]:
    """Per detector and for the union (``combined``): flagged / n per clean set and pooled,
    with intervals (:func:`robusteval.stats.flag_rate`, resampling each set's ``clusters`` --
    several references of one document, several replies of one context are not independent --
    and, pooled, each set's clusters apart); a text is flagged where its suspicion reaches the
    threshold that applies to it."""
    from robusteval.stats import flag_rate, scoped

    out: dict[str, Any] = {}
    names = [d.name for d in dets] + ["combined"]
    for name in names:
        per: dict[str, Any] = {}
        pooled: list[bool] = []
        pooled_keys: list[str] = []
        for set_name, by_det in clean.items():
            if name == "combined":
                flags = np.any(np.stack([by_det[d.name][0] >= by_det[d.name][1] for d in dets]), axis=0)
            else:
                susp, thr = by_det[name]
                flags = susp >= thr
            keys = (clusters or {}).get(set_name) or [f"{i}" for i in range(len(flags))]
            if len(keys) != len(flags):
                raise ValueError(f"{set_name}: {len(keys)} cluster keys for {len(flags)} clean texts")
            pooled += flags.tolist()
            pooled_keys += [scoped(set_name, k) for k in keys]
            per[set_name] = flag_rate(flags, keys)
        per["pooled"] = flag_rate(pooled, pooled_keys)
        out[name] = per
    return out


def roc(negatives: np.ndarray, positives: np.ndarray, max_points: int = 200,
        negative_clusters: Sequence[str] | None = None, positive_clusters: Sequence[str] | None = None,
        n_boot: int = 1000) -> dict[str, Any]:
    """ROC of a suspicion score (higher = more suspicious): points (FPR, TPR) from the
    strictest threshold to the loosest, and the area under the curve (ties count half) with
    its interval (:func:`robusteval.stats.auc_ci`, resampling each side's clusters: a clean
    text's conversation, an attacked row's dataset and context)."""
    from robusteval.stats import auc_ci

    neg, pos = np.asarray(negatives, float), np.asarray(positives, float)
    area = auc_ci(neg, pos, negative_clusters, positive_clusters, n_boot=n_boot)
    if area["auc"] is None:
        return {**area, "points": []}
    cuts = np.unique(np.concatenate([neg, pos]))[::-1]
    pts = [(0.0, 0.0)] + [(float(np.mean(neg >= c)), float(np.mean(pos >= c))) for c in cuts]
    if pts[-1] != (1.0, 1.0):
        pts.append((1.0, 1.0))
    if len(pts) > max_points:  # keep the curve's shape, drop interior points evenly
        keep = np.unique(np.linspace(0, len(pts) - 1, max_points).round().astype(int))
        pts = [pts[i] for i in keep]
    return {**area, "points": [[round(x, 6), round(y, 6)] for x, y in pts]}


def adversarial_suspicion(rows: Sequence[dict[str, Any]],
                          names: Sequence[str]) -> tuple[dict[str, np.ndarray], list[str]]:
    """Each detector's suspicion of the adversarial texts of R- results, read from the guard
    details the attack runner stored in the rows of a guarded victim, and each text's cluster
    (:func:`robusteval.asr.cluster_of`: its dataset and context). As in ``guard evaluate``
    (:func:`robusteval.detectors.calibrate.adversarial_samples`), a row without a new text (a
    search that changed nothing keeps its start text, which may be another context's reply)
    is no attacked text."""
    out: dict[str, list[float]] = {n: [] for n in names}
    keys: list[str] = []
    from robusteval.asr import changed, cluster_of, counted

    for r in counted(rows):
        if r.direction != "R-" or not changed(r):
            continue
        adv = (r.meta.get("guard") or {}).get("adversarial")
        if not adv:
            continue
        for n in names:
            out[n].append(float(adv["suspicion"][n]))
        keys.append(cluster_of(r))
    return {n: np.array(v, dtype=float) for n, v in out.items()}, keys
