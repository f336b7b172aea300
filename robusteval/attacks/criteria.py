"""Success criteria for attack results; every criterion is reported for every result.

* ``gold`` (AdvEval, Chen et al. 2024, §3.1): an R+ text succeeds when the gold evaluator
  rates it >= tau1 (70) and the victim rates it at least tau2 (40) below the gold; an R-
  text succeeds when the gold rates it <= tau1 (30) and the victim at least tau2 above it.
  None without a gold evaluator.
* ``beats_reference`` (Vasselli & Watanabe 2023): an R- text succeeds when the victim scores
  it at least as high as the reference (ties count). None for R+.
* ``expectation`` (Hu et al. 2024 directional / invariance tests): an R- attack should make
  the victim's score drop, so it succeeds when the score does not drop; an R+ attack should
  leave it unchanged, so it succeeds when the score moves by more than ``tolerance``. For an
  aspect-targeted attack (``meta["aspect"]``) the victim's own aspect decides: if it is the
  targeted aspect or one of its ancestors the directional test applies; if it is unrelated
  (neither ancestor nor descendant) the invariance test applies (the score must not move);
  for a descendant there is no expectation (None).
"""

from __future__ import annotations

from dataclasses import dataclass

from robusteval.attacks.base import AttackResult


def expectation_test(attack_aspect: str | None, victim_aspect: str) -> str | None:
    """"directional", "invariance" or None for an R- attack against a victim of an aspect."""
    if attack_aspect is None:
        return "directional"
    from robusteval.attacks.aspect import ancestors, related

    if victim_aspect in ancestors(attack_aspect):
        return "directional"
    return None if related(attack_aspect, victim_aspect) else "invariance"


UNIEVAL_ASPECTS = {"fluency": "Fluency", "naturalness": "Fluency", "understandability": "Fluency",
                   "coherence": "Coherence", "consistency": "Faithfulness", "groundedness": "Faithfulness",
                   "relevance": "Informativeness", "informativeness": "Informativeness"}


def victim_aspect(metric: object) -> str:
    """The quality aspect a victim metric claims to measure (Overall_quality if it does not say)."""
    aspect = getattr(metric, "aspect", None)
    if isinstance(aspect, str):
        return aspect
    dim = getattr(metric, "dimension", None)
    return UNIEVAL_ASPECTS.get(str(dim), "Overall_quality")


@dataclass(frozen=True)
class Criteria:
    tau1_pos: float = 70.0
    tau1_neg: float = 30.0
    tau2: float = 40.0
    tolerance: float = 1.0

    def judge(self, r: AttackResult, reference_score: float | None,
              victim_aspect: str = "Overall_quality") -> dict[str, bool | None]:
        if not r.applicable or r.victim_after is None:
            return {"gold": None, "beats_reference": None, "expectation": None}
        gold: bool | None = None
        if r.gold_after is not None:
            if r.direction == "R+":
                gold = r.gold_after >= self.tau1_pos and r.gold_after - r.victim_after >= self.tau2
            else:
                gold = r.gold_after <= self.tau1_neg and r.victim_after - r.gold_after >= self.tau2
        beats: bool | None = None
        if r.direction == "R-" and reference_score is not None:
            beats = r.victim_after >= reference_score
        expectation: bool | None = None
        if r.victim_before is not None:
            moved = abs(r.victim_after - r.victim_before) > self.tolerance
            test = expectation_test(r.meta.get("aspect"), victim_aspect) if r.direction == "R-" else "invariance"
            if test == "directional":
                expectation = r.victim_after >= r.victim_before
            elif test == "invariance":
                expectation = moved
        return {"gold": gold, "beats_reference": beats, "expectation": expectation}
