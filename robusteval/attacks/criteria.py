"""Success criteria for attack results; every criterion is reported for every result.

* ``gold`` (AdvEval, Chen et al. 2024, §3.1): an R+ text succeeds when the gold evaluator
  rates it >= tau1 (70) and the victim rates it at least tau2 (40) below the gold; an R-
  text succeeds when the gold rates it <= tau1 (30) and the victim at least tau2 above it.
  None without a gold evaluator.
* ``beats_reference`` (Vasselli & Watanabe 2023): an R- text succeeds when the victim scores
  it at least as high as the reference (ties count). None for R+.
* ``expectation`` (Hu et al. 2024 directional / invariance tests): an R- attack should make
  the victim's score drop, so it succeeds when the score does not drop; an R+ attack should
  leave it unchanged, so it succeeds when the score moves by more than ``tolerance``.
"""

from __future__ import annotations

from dataclasses import dataclass

from robusteval.attacks.base import AttackResult


@dataclass(frozen=True)
class Criteria:
    tau1_pos: float = 70.0
    tau1_neg: float = 30.0
    tau2: float = 40.0
    tolerance: float = 1.0

    def judge(self, r: AttackResult, reference_score: float | None) -> dict[str, bool | None]:
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
            if r.direction == "R-":
                expectation = r.victim_after >= r.victim_before
            else:
                expectation = abs(r.victim_after - r.victim_before) > self.tolerance
        return {"gold": gold, "beats_reference": beats, "expectation": expectation}
