"""[committee] Disagreement among a jury of judges, as a suspicion a guard can act on.

An adversarial text is built against one evaluator, or transfers unevenly: it fools one judge
(one template, one model) while the others still see through it, so the jury splits. Verga et
al. 2024 (PoLL, "Replacing Judges with Juries") motivate diverse panels; issue 16 reports
multi-model committees cutting attack success to 10-19 %. The suspicion is the members' score
spread (``range`` = max - min, or ``mad``; :func:`robusteval.metrics.committee.spread`)
divided by the largest spread 0-100 scores can have, so 0.3 = a 30-point range.

Built from member specs, so a guard config can name it:

    guard:
      detectors:
        - name: committee
          options: {members: [{template: geval}, {template: adveval-dialogue}], spread: range}
      policy: floor

Members on different scales (an LLM judge, a trained cross-encoder, BERTScore) only disagree
meaningfully once on one scale: ``normalize: quantile`` with ``calibration`` (clean samples or
a dataset name, as :class:`~robusteval.metrics.committee.Committee` takes them) puts each
member's score at its percentile among its scores of the calibration texts:

    - name: committee
      options: {members: [{template: geval}, cross-encoder, {name: bertscore, options: {against: context}}],
                normalize: quantile, calibration: clean_replies.jsonl}

or around an existing :class:`~robusteval.metrics.committee.Committee` (``committee=``, whose
threshold then becomes the default threshold). Not among the default detectors
(``detectors.names()``): it has nothing to judge with until members are given.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any, ClassVar

import numpy as np
from robusteval.detectors.base import Detector, register_detector

from robusteval.metrics.committee import SPREAD_MAX, Committee, spread
from robusteval.metrics.inner import failed_since, failure_marks, relabel_failures
from robusteval.types import Sample


@register_detector
class CommitteeDisagreement(Detector):
    """Members of a committee of judges disagree: their score spread, normalized to [0, 1]."""

    name: ClassVar[str] = "committee"
    family: ClassVar[str] = "disagreement"
    source: ClassVar[str] = ("Verga et al. 2024, Replacing Judges with Juries (PoLL); issue 16: multi-model "
                             "committees cut ASR to 10-19 %")
    default_threshold: ClassVar[float] = 0.3
    listed: ClassVar[bool] = False  # needs members; built from a guard config's options

    def __init__(self, members: Sequence[Any] | None = None, spread: str = "range",
                 committee: Committee | None = None, threshold: float | None = None, normalize: str = "none",
                 calibration: Any = None, data_dir: str | None = None) -> None:
        super().__init__(threshold)
        if committee is None:
            if not members:
                raise ValueError("the committee detector needs members=[...] (metric names, {name, options} "
                                 "dicts, dicts of llm-judge options or metrics) or committee=")
            committee = Committee(members, spread=spread, normalize=normalize, calibration=calibration,
                                  data_dir=data_dir)
        elif members:
            raise ValueError("give members= or committee=, not both")
        elif normalize != "none" or calibration is not None:
            raise ValueError("normalize= and calibration= build a committee from members=; a committee= given "
                             "whole keeps its own")
        self.committee = committee
        if threshold is None:  # the committee's own threshold, normalized (0.3 unless it has another)
            self.threshold = committee.threshold / SPREAD_MAX[committee.spread]

    def _analyze(self, samples: list[Sample]) -> list[dict[str, Any]]:
        # the judges name a failed request by sample id; an attack's candidates share one, so
        # they are asked under ids of their own for the failures to land on the right texts,
        # and the judges' records then get the sample's own id back (what a caller looks up)
        own = {x.id: x.id for x in samples}
        if len(own) < len(samples):
            tagged = [replace(x, id=f"{x.id} (text {j + 1} of {len(samples)})") for j, x in enumerate(samples)]
            own = {t.id: x.id for t, x in zip(tagged, samples, strict=True)}
            samples = tagged
        marks = failure_marks(self.committee)
        matrix = self.committee.member_scores(samples)
        failed = failed_since(marks)
        relabel_failures(marks, own)
        spr = spread(matrix, self.committee.spread)
        scale = SPREAD_MAX[self.committee.spread]
        # a member whose request failed scored the midpoint: that spread is no verdict, so the
        # row says so (counted as a fallback, never memoized: the next look asks again)
        return [{"suspicion": float(s) / scale, "spread": float(s),
                 "members": dict(zip(self.committee.labels, np.round(matrix[:, j], 6).tolist(), strict=True)),
                 **({"fallback": "llm_failed", "llm_failed": failed[x.id]} if failed[x.id] else {})}
                for j, (s, x) in enumerate(zip(spr, samples, strict=True))]

    def signature(self) -> str:
        """The members and the spread (a calibrated threshold is tied to them)."""
        return self.committee.jury_signature()
