"""Calibrate detector thresholds on clean text; measure detection and false-positive rates.

``calibrate``: for each detector, the smallest threshold that flags at most ``target_fpr`` of
the calibration half of the clean sets. With several detectors combined by a guard (a sample
is flagged when *any* detector flags it), each detector gets ``combined_fpr / k`` so that the
union stays within ``combined_fpr`` (Bonferroni). With a ``confidence`` each threshold keeps a
one-sided upper bound on its FPR within the target instead of its point estimate (a correction
for few calibration texts, :func:`threshold_for`), each detector of a combination at
1 - (1 - confidence) / k so that the union's bound holds at ``confidence``. Thresholds go to a JSON file with the
detectors' settings, so a threshold is never applied to a detector configured differently.

``evaluate``: detection rate per attack family (and direction) on the adversarial texts of
attack-runner result files, and false-positive rate per clean set on the held-out half,
for every detector and for the combination.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from robusteval.detectors.base import Detector, check_unique

from robusteval import execution
from robusteval.errors import DataFormatError
from robusteval.types import Sample


def threshold_for(suspicion: np.ndarray, target_fpr: float, confidence: float | None = None) -> float:
    """Smallest threshold t with mean(suspicion >= t) <= target_fpr (above 1 if none fits).

    With a ``confidence`` (e.g. 0.95) the point estimate is replaced by a bound: t is the
    smallest threshold whose flagged count k on the n calibration values has a one-sided
    Clopper-Pearson upper bound (:func:`robusteval.stats.binomial_upper`) of at most
    ``target_fpr``: for independent draws, the threshold's true FPR on the population they come
    from exceeds the target with probability at most ``1 - confidence`` over the calibration
    draw. Where even k = 0 cannot be bounded that tightly
    (n below about ln(1 / (1 - confidence)) / target_fpr) the threshold flags none of the values,
    the strictest there is. The bound treats the values as independent draws; texts that share a
    conversation are not, so it is a correction for the size of the calibration set, not a
    guarantee across conversations."""
    s = np.sort(np.asarray(suspicion, dtype=float))[::-1]
    if len(s) == 0:
        return 1.0
    allowed = math.floor(target_fpr * len(s) + 1e-9) if confidence is None else _bounded(len(s), target_fpr, confidence)
    if allowed >= len(s):
        return float(s[-1])
    # flag the `allowed` largest values at most: the threshold sits just above s[allowed]
    return float(np.nextafter(s[allowed], np.inf))


def _bounded(n: int, target_fpr: float, confidence: float) -> int:
    """The largest k whose upper bound at ``confidence`` is at most ``target_fpr`` (0 if none)."""
    from robusteval.stats import binomial_upper

    k = 0
    while k < n and binomial_upper(k + 1, n, confidence) <= target_fpr:
        k += 1
    return k


def _entry(d: Detector, values: np.ndarray, per: float, floor_at_default: bool = False,
           confidence: float | None = None) -> dict[str, Any]:
    """One detector's calibrated threshold on ``values`` (its suspicions on clean text); with a
    ``confidence``, also the upper bound on its FPR that the threshold was chosen to keep."""
    from robusteval.stats import binomial_upper, flag_rate

    raw = threshold_for(values, per, confidence)
    t = max(raw, d.default_threshold) if floor_at_default else raw
    rate = flag_rate(values >= t)
    entry = {"threshold": t, "signature": d.identity(), "target_fpr": per,
             "calibration_fpr": rate["rate"], "n": len(values), "never_fires": t > 1.0}
    if confidence is not None:
        entry["fpr_upper_bound"] = binomial_upper(rate["flagged"], rate["n"], confidence)
    return {**entry, "calibrated": raw} if floor_at_default else entry


def _suspicions(detectors: Sequence[Detector], samples: list[Sample], log: Any) -> dict[str, np.ndarray]:
    return {d.name: detect_logged(d, samples, log, desc=f"calibrating {d.name}") for d in detectors}


def _per_detector(detectors: Sequence[Detector], target_fpr: float, combined: bool) -> float:
    if not 0.0 <= target_fpr < 1.0:
        raise ValueError(f"target FPR must be in [0, 1), got {target_fpr}")
    return target_fpr / len(detectors) if combined and detectors else target_fpr


def per_detector_confidence(detectors: Sequence[Detector], confidence: float | None, combined: bool) -> float | None:
    """Each detector's confidence when the union must hold: with k detectors each bounded at
    target / k, the union stays within the target unless one of the k bounds fails, which
    happens with probability at most k (1 - c_k); c_k = 1 - (1 - confidence) / k keeps that at
    1 - confidence (Bonferroni, as for the rate)."""
    if confidence is None or not (combined and len(detectors) > 1):
        return confidence
    return 1.0 - (1.0 - confidence) / len(detectors)


def calibrate(detectors: Sequence[Detector], clean: dict[str, list[Sample]], target_fpr: float = 0.01,
              combined: bool = True, log: Any = None,
              suspicions: dict[str, np.ndarray] | None = None, confidence: float | None = None) -> dict[str, Any]:
    """Thresholds per detector fitted on ``clean`` (set name -> samples); ``suspicions`` (per
    detector, in the order of the samples) when the caller has them already; ``confidence``:
    bound each detector's FPR instead of estimating it (:func:`threshold_for`), combined at
    ``1 - (1 - confidence) / k`` each, so that the union's bound holds at ``confidence``."""
    check_unique(detectors)
    per = _per_detector(detectors, target_fpr, combined)
    conf = per_detector_confidence(detectors, confidence, combined)
    samples = [s for group in clean.values() for s in group]
    if not samples:
        raise DataFormatError(f"clean sets {', '.join(clean) or '(none)'}", "no clean texts to calibrate on")
    susp = suspicions if suspicions is not None else _suspicions(detectors, samples, log)
    table = {d.name: {**_entry(d, susp[d.name], per, confidence=conf), "report": d.report()} for d in detectors}
    from robusteval.detectors.clean import CLEAN_SPLIT

    bound = {} if confidence is None else {"per_detector_confidence": conf}
    return {"target_fpr": target_fpr, "combined": combined, "per_detector_fpr": per, "confidence": confidence,
            **bound, "clean_sets": {k: len(v) for k, v in clean.items()}, "clean_split": CLEAN_SPLIT,
            "detectors": table}


def calibrate_groups(detectors: Sequence[Detector], clean: dict[str, list[Sample]], target_fpr: float = 0.01,
                     combined: bool = True, log: Any = None, min_n: int = 50,
                     floor_at_default: bool = False, confidence: float | None = None) -> dict[str, Any]:
    """:func:`calibrate` per group (task and detected response language,
    :func:`robusteval.detectors.defaults.group_of`) of the clean samples, for groups of at
    least ``min_n`` samples; ``detectors`` is the table pooled over every group. Each detector
    runs once over the samples. What ``robusteval guard calibrate --by-group`` writes and the
    package ships as its defaults.

    With ``floor_at_default`` a group's threshold is never below the detector's class default
    (``calibrated`` keeps the fitted value): a group of about 100 clean texts in which a detector never
    fired would otherwise get a threshold just above 0, stricter than anything the data
    supports; the shipped defaults are made this way."""
    from robusteval.detectors.defaults import group_of

    check_unique(detectors)
    per = _per_detector(detectors, target_fpr, combined)
    conf = per_detector_confidence(detectors, confidence, combined)
    samples = [s for group in clean.values() for s in group]
    susp = _suspicions(detectors, samples, log)
    pooled = calibrate(detectors, clean, target_fpr, combined=combined, suspicions=susp, confidence=confidence)
    members: dict[str, list[int]] = {}
    for i, s in enumerate(samples):
        members.setdefault(group_of(s), []).append(i)
    groups: dict[str, Any] = {}
    small: dict[str, int] = {}
    for g in sorted(members):
        idx = members[g]
        if len(idx) < min_n:
            small[g] = len(idx)
            continue
        groups[g] = {"n": len(idx), "detectors": {d.name: _entry(d, susp[d.name][idx], per, floor_at_default,
                                                                 conf) for d in detectors}}
    return {**pooled, "groups": groups, "groups_too_small": small, "min_n": min_n,
            "floor_at_default": floor_at_default}


# -- evaluation ----------------------------------------------------------------------------
def adversarial_samples(rows: Sequence[dict[str, Any]], by_id: dict[str, Sample],
                        dataset: str | None = None) -> list[tuple[dict[str, Any], Sample]]:
    """(row, sample with the adversarial response) for attacked rows with a changed text,
    skipping fitting samples. A row that names no dataset gets ``dataset`` (the one its samples
    were loaded from), so the detection intervals never merge two datasets' conversations."""
    from robusteval.asr import changed, counted

    out = []
    for r in counted(rows):
        if not changed(r):  # no new text (an exhausted search's unchanged start)
            continue
        base = by_id.get(r.sample_id)
        if base is None:
            raise DataFormatError("attack results", f"sample {r.sample_id!r} is not in the dataset",
                                  field="sample_id")
        row = r.to_dict()
        if not row.get("dataset"):
            row["dataset"] = dataset
        out.append((row, base.with_response(r.adversarial)))
    return out


def rates(flags: np.ndarray, groups: Sequence[str],
          clusters: Sequence[str] | None = None) -> dict[str, dict[str, Any]]:
    """Share flagged per group (flags: bool [n]), with its interval
    (:func:`robusteval.stats.flag_rate`, the one FPR / detection-rate function), resampling
    ``clusters`` (each text's conversation or document) where several texts share one."""
    from robusteval.stats import flag_rate

    flags = np.asarray(flags, dtype=bool)
    out: dict[str, dict[str, Any]] = {}
    for g in dict.fromkeys(groups):
        idx = [i for i, x in enumerate(groups) if x == g]
        out[g] = flag_rate(flags[idx], [clusters[i] for i in idx] if clusters is not None else None)
    return out


def evaluate(detectors: Sequence[Detector], attacked: Sequence[tuple[dict[str, Any], Sample]],
             clean: dict[str, list[Sample]], log: Any = None) -> dict[str, Any]:
    """Detection rates per family / attack and FPR per clean set, per detector and combined."""
    from robusteval.stats import scoped

    check_unique(detectors)
    adv = [s for _, s in attacked]
    families = [f"{r['family']} ({r['direction']})" for r, _ in attacked]
    attacks = [r["attack"] for r, _ in attacked]
    clean_samples = [s for group in clean.values() for s in group]
    clean_groups = [name for name, group in clean.items() for _ in group]
    # what the intervals resample: a document's references, a context's replies and attack texts
    # are not independent (each set's and each dataset's conversations apart)
    clean_clusters = [scoped(name, s.conversation_key()) for name, group in clean.items() for s in group]
    adv_clusters = [scoped(r.get("dataset"), s.conversation_key()) for r, s in attacked]
    adv_flags: dict[str, np.ndarray] = {}
    clean_flags: dict[str, np.ndarray] = {}
    for d in detectors:
        # per-sample thresholds: a detector without a given or calibrated one uses the shipped
        # default of each text's task and language (robusteval.detectors.defaults)
        adv_flags[d.name] = detect_logged(d, adv, log, desc=f"{d.name} on attacks") >= d.thresholds(adv)
        clean_flags[d.name] = (detect_logged(d, clean_samples, log, desc=f"{d.name} on clean text")
                               >= d.thresholds(clean_samples))
    adv_flags["combined"] = np.any(np.stack(list(adv_flags.values())), axis=0)
    clean_flags["combined"] = np.any(np.stack(list(clean_flags.values())), axis=0)
    return {
        "thresholds": {d.name: d.threshold if d.threshold_source != "default" else "default (per task and language)"
                       for d in detectors},
        "detection_by_family": {k: rates(v, families, adv_clusters) for k, v in adv_flags.items()},
        "detection_by_attack": {k: rates(v, attacks, adv_clusters) for k, v in adv_flags.items()},
        "false_positive_rate": {k: rates(v, clean_groups, clean_clusters) for k, v in clean_flags.items()},
        "reports": [d.report() for d in detectors],
    }


def evaluation_markdown(result: dict[str, Any]) -> str:
    """Detection rate per family (rows) x detector (columns), then FPR per clean set (each with
    its 95 % interval)."""
    from robusteval.stats import pct

    dets = list(result["detection_by_family"])
    fams = sorted({f for v in result["detection_by_family"].values() for f in v})
    lines = ["### Detection rate (%, 95 % interval) per attack family", "",
             "| family (direction) | n | " + " | ".join(dets) + " |", "|---|---|" + "---|" * len(dets)]
    for f in fams:
        n = result["detection_by_family"][dets[0]][f]["n"]
        cells = [pct(result["detection_by_family"][d][f]) for d in dets]
        lines.append(f"| {f} | {n} | " + " | ".join(cells) + " |")
    sets = sorted({g for v in result["false_positive_rate"].values() for g in v})
    lines += ["", "### False-positive rate (%, 95 % interval) on held-out clean text", "",
              "| clean set | n | " + " | ".join(dets) + " |", "|---|---|" + "---|" * len(dets)]
    for g in sets:
        n = result["false_positive_rate"][dets[0]][g]["n"]
        cells = [pct(result["false_positive_rate"][d][g]) for d in dets]
        lines.append(f"| {g} | {n} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def detect_logged(detector: Detector, samples: Sequence[Sample], log: Any = None, chunk: int = 256,
                  desc: str | None = None) -> np.ndarray:
    """``detector.detect(samples)`` in chunks with a progress bar; with ``log`` (a JsonlLog keyed
    ``key``) every finished chunk is appended and reused on resume -- except a suspicion computed
    over a failed LLM request (a committee detector's member scored the midpoint), which is saved
    with ``llm_failed`` and computed again by the next resume."""
    from tqdm import tqdm

    sig = detector.identity()

    def key(s: Sample) -> str:
        # everything the detector reads, not the response alone: a user's file can give two
        # samples one id and one response after different contexts
        return f"{detector.name}|{sig}|{s.id}|{detector.input_digest(s)}"

    keys = [key(s) for s in samples]
    todo = [i for i, k in enumerate(keys) if log is None or k not in log or log.rows[k].get("llm_failed")]
    parts = execution.chunks(todo, chunk)
    with tqdm(total=len(samples), initial=len(samples) - len(todo), desc=desc or detector.name, unit="text",
              dynamic_ncols=True, leave=False) as bar:
        fresh: dict[str, float] = {}
        executor = execution.current()
        for j, (values, fallbacks, failed) in executor.map(DetectWorker, [detector], "run",
                                                           [[samples[i] for i in part] for part in parts],
                                                           desc=desc or detector.name, label=execution.span):
            if not executor.in_process:  # a copy counted them: this detector's report() tells them
                detector.fallbacks.update(fallbacks)
            part = parts[j]
            rows = [{"key": keys[i], "suspicion": float(v), **({"llm_failed": n} if n else {})}
                    for i, v, n in zip(part, values, failed, strict=True)]
            fresh.update((r["key"], r["suspicion"]) for r in rows)
            if log is not None:
                log.append(rows, replace=True)  # only rows to do are here: new, or failed before
            bar.update(len(part))
    return np.array([fresh[k] if k in fresh else log.rows[k]["suspicion"] for k in keys], dtype=float)


class DetectWorker:
    """A detector's suspicion of one chunk of samples: the unit of :func:`detect_logged` an
    executor runs."""

    def __init__(self, detector: Detector) -> None:
        self.detector = detector

    def run(self, part: Sequence[Sample]) -> tuple[list[float], dict[str, int], list[int]]:
        """The chunk's suspicions, the fallbacks the detector counted on it, and per sample how
        many of its LLM requests failed (a row that is no verdict yet)."""
        from robusteval.results import counter_delta

        before = dict(self.detector.fallbacks)
        rows = self.detector.analyze(list(part))
        values = [float(r["suspicion"]) for r in rows]
        return values, counter_delta(before, self.detector.fallbacks), [int(r.get("llm_failed") or 0) for r in rows]
