"""Defenses that return a Metric (DESIGN.md): guards live in :mod:`robusteval.detectors`,
hardened evaluators in :mod:`robusteval.training`; here, randomized smoothing.

    robusteval.defenses.smooth(metric, perturbation="synonym", n=32, seed=0, alpha=0.05) -> SmoothedMetric
"""

from __future__ import annotations

from robusteval.defenses.perturbations import PERTURBATIONS, Perturbation
from robusteval.defenses.smoothing import Certificate, SmoothedMetric, certified_fraction, smooth

__all__ = ["PERTURBATIONS", "Certificate", "Perturbation", "SmoothedMetric", "certified_fraction", "smooth"]
