"""Shipped default thresholds per task and language (issue 14: safe defaults).

A detector built without a threshold (``threshold_source == "default"``) does not apply one
number to every text: the package ships thresholds calibrated on clean, human-written text per
*group* -- a task and a response language, e.g. ``dialogue/fr`` or ``summarization/en`` --
in ``robusteval/resources/detectors/default_thresholds.json``. For each sample the guard looks
up, in order:

1. ``<task>/<declared language>`` (the sample's ``meta["language"]``, normalized);
2. ``<task>/<detected language>`` (:func:`robusteval.langid.language` of the response: a
   Latin-script language code, or the script for the others: ``und-cjk``, ``und-arabic``...);
3. ``<task>/*``: the *largest* threshold calibrated for the task in any language (a language
   nobody calibrated gets the most permissive of the known ones, never the strictest);
4. the detector's class default.

An entry is used only when it was calibrated with the detector's current settings (its
``signature``): a gec running LanguageTool never gets the builtin backend's threshold.

The file is written by ``robusteval guard calibrate --by-group`` (``configs/guard/defaults.yaml``;
docs/detectors.md, "Shipped default thresholds", has the procedure) and copied into the package.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from robusteval.paths import resource
from robusteval.types import Sample

FILE = "detectors/default_thresholds.json"


@functools.lru_cache(maxsize=1)
def shipped() -> dict[str, dict[str, dict[str, Any]]]:
    """group -> detector -> entry (threshold, signature, n, ...); empty if none is shipped."""
    path = resource(FILE)
    if not path.is_file():
        return {}
    data = json.loads(path.read_text(encoding="utf-8"))
    return {g: dict(t.get("detectors") or {}) for g, t in (data.get("groups") or {}).items()}


@functools.lru_cache(maxsize=1)
def version() -> str:
    """A digest of the shipped table (part of a guarded metric's reproducibility string)."""
    import hashlib

    path = resource(FILE)
    return hashlib.sha256(path.read_bytes()).hexdigest()[:12] if path.is_file() else "none"


def group_of(sample: Sample) -> str:
    """The group a clean sample calibrates: its task and the detected language of its response."""
    from robusteval.langid import language

    return f"{sample.task}/{language(sample.response)}"


def group_keys(sample: Sample) -> list[str]:
    """The groups to try for ``sample``, most specific first (see the module docstring)."""
    from robusteval.langid import language, normalize

    declared = (sample.meta or {}).get("language")
    keys = [f"{sample.task}/{normalize(str(declared))}"] if declared else []
    keys.append(f"{sample.task}/{language(sample.response)}")
    return [*dict.fromkeys(keys), f"{sample.task}/*"]


def lookup(table: dict[str, dict[str, dict[str, Any]]], detector: Any, keys: Sequence[str]) -> float | None:
    """The threshold for ``detector`` from a group table, trying ``keys`` (:func:`group_keys`)."""
    sig = detector.identity()
    for key in keys:
        if key.endswith("/*"):
            task = key[:-2]
            found = [float(t[detector.name]["threshold"]) for g, t in table.items()
                     if g.startswith(f"{task}/") and detector.name in t and t[detector.name].get("signature") == sig]
            if found:
                return max(found)
            continue
        entry = table.get(key, {}).get(detector.name)
        if entry is not None and entry.get("signature") == sig:
            return float(entry["threshold"])
    return None


def thresholds(detector: Any, samples: Sequence[Sample],
               table: dict[str, dict[str, dict[str, Any]]] | None = None) -> np.ndarray:
    """Per-sample thresholds of ``detector``: its own when it was given or calibrated one,
    else the group defaults (``table``, by default the shipped one), else its class default.
    Samples of one group share one lookup (a guard screens every text of an attack search)."""
    if detector.threshold_source != "default":
        return np.full(len(samples), float(detector.threshold))
    table = shipped() if table is None else table
    if not table:
        return np.full(len(samples), float(detector.threshold))
    out = np.empty(len(samples))
    seen: dict[tuple[str, ...], float] = {}
    for i, s in enumerate(samples):
        keys = tuple(group_keys(s))
        if keys not in seen:
            found = lookup(table, detector, keys)
            seen[keys] = float(detector.threshold) if found is None else found
        out[i] = seen[keys]
    return out
