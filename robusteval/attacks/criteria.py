"""Success criteria for attack results; every criterion is reported for every result.

* ``gold`` — AdvEval (Chen et al. 2024, §3.1 Eq. 3, thresholds from App. A.2): an R+ text
  succeeds when the gold evaluator rates it *above* tau1 (70) and the victim rates it *more
  than* tau2 (40) below the gold; an R- text succeeds when the gold rates it *below* tau1
  (30) and the victim more than tau2 above it. Both inequalities are strict, as in the
  paper. None without a gold evaluator.
* ``beats_reference`` — Vasselli & Watanabe (§3): an R- text succeeds when the victim scores
  it at least as high as the reference (ties count). None for R+.
* ``expectation`` — the directional / invariance expectations of Hu et al. 2024 (§3, Table 19)
  for R- texts: the victim's score should drop, so the attack succeeds when it does not drop.
  For an aspect-targeted perturbation (``meta["perturbation"]``) the aspect the victim scores
  (``Metric.aspect``) decides, through :func:`robusteval.aspects.expectation`: where Table 19
  expects that aspect to be affected the directional test applies; everywhere else --
  unrelated aspects and descendants of the targeted one alike -- the invariance test applies
  (the score must not move by more than ``invariance_tolerance``). With
  ``human_agreed_only`` (the default, as the paper's S_T / S_F sets) a cell where Table 19's
  human annotators disagreed with the expectation has no verdict (None). None for R+.
* ``invariance`` — **robusteval's own** criterion for R+ texts without a gold evaluator (no
  source paper defines one): a meaning-preserving rewrite should leave the score where it
  was, so the attack succeeds when the score moves by more than ``invariance_tolerance``
  points (default 1.0 on the 0-100 scale) in either direction. None for R-.

**Ties** (``beats_reference`` and the directional ``expectation``) are judged with
``tie_tolerance`` (default 0.001 points on the 0-100 scale): a score within it of the
reference counts as tied. A learned metric scores the same text a few millionths of a point
apart in different batches (float32 arithmetic; measured up to 1.2e-5 for BERTScore MiniLM),
so an exact ``>=`` made a tie fooled or not by chance: under the ``sanitize`` guard, which
scores a tagged reply exactly as its original, 11 of 60 ties per speaker tag came out as
"not fooled" in one benchmark (BENCHMARKS §9d).

A row whose attack ran but produced no candidate at all (``adversarial`` None), or whose best
candidate is the clean original itself (an R+ search that found no useful swap), is a failed
attack: every criterion that applies to its direction says False.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from robusteval.aspects import OVERALL, expectation
from robusteval.attacks.base import AttackResult

CRITERIA = ("gold", "beats_reference", "expectation", "invariance")
# /2: strict AdvEval Eq. 3; invariance split from expectation
# /3: Table 19's hierarchy and expectations (robusteval.aspects), human_agreed_only
# /4: ties within tie_tolerance (float noise between batches no longer decides a tie)
CRITERIA_VERSION = "robusteval.criteria/4"
PRIMARY = {"R-": "beats_reference", "R+": "invariance"}


@dataclass(frozen=True)
class Criteria:
    """Thresholds of the criteria above (config key ``criteria:``)."""

    tau1_pos: float = 70.0
    tau1_neg: float = 30.0
    tau2: float = 40.0
    invariance_tolerance: float = 1.0
    human_agreed_only: bool = True
    tie_tolerance: float = 0.001

    def __post_init__(self) -> None:
        for name in ("tau1_pos", "tau1_neg", "tau2", "invariance_tolerance", "tie_tolerance"):
            value = getattr(self, name)
            if not math.isfinite(value):
                raise ValueError(f"criteria: {name} must be a finite number, got {value!r}")
        for name in ("tau2", "invariance_tolerance", "tie_tolerance"):
            if getattr(self, name) < 0:
                raise ValueError(f"criteria: {name} cannot be negative, got {getattr(self, name)!r}")

    @classmethod
    def from_config(cls, cfg: dict[str, Any] | None) -> Criteria:
        from robusteval.errors import RobustevalError

        cfg = dict(cfg or {})
        unknown = set(cfg) - set(cls.__dataclass_fields__)
        if unknown:
            raise RobustevalError(f"unknown criteria option(s) {sorted(unknown)}; "
                                  f"use {', '.join(cls.__dataclass_fields__)}")
        flags = {"human_agreed_only"}
        bad = [k for k in flags & set(cfg) if not isinstance(cfg[k], bool)]
        if bad:
            raise RobustevalError(f"criteria option(s) {bad} must be true or false")
        try:
            return cls(**{k: (v if k in flags else float(v)) for k, v in cfg.items()})
        except (TypeError, ValueError) as e:
            raise RobustevalError(str(e) if str(e).startswith("criteria:")
                                  else f"criteria: every threshold must be a number ({e})") from e

    def describe(self) -> dict[str, Any]:
        """The settings and version, as every result row records them."""
        return {"version": CRITERIA_VERSION, **asdict(self)}

    def at_least(self, score: float, other: float) -> bool:
        """``score >= other`` with scores within ``tie_tolerance`` of each other counted as tied."""
        return score >= other - self.tie_tolerance

    def gold_verdict(self, direction: str, gold: float, victim: float) -> bool:
        """AdvEval Eq. 3 (strict inequalities)."""
        if direction == "R+":
            return gold > self.tau1_pos and gold - victim > self.tau2
        return gold < self.tau1_neg and victim - gold > self.tau2

    def judge(self, r: AttackResult, reference_score: float | None,
              victim_aspect: str = OVERALL) -> dict[str, bool | None]:
        none: dict[str, bool | None] = dict.fromkeys(CRITERIA)
        if r.outcome not in ("attacked", "rejected"):
            return none
        if r.direction == "R-" and r.meta.get("perturbation") is not None:
            cell = expectation(r.meta["perturbation"], victim_aspect, self.human_agreed_only)
        else:
            cell = "directional"
        # ran and found nothing, or "found" the clean original itself (an exhausted R+ search):
        # failed -- two scorings of one text must not count as a move
        # (a text the guard refused, ``rejected``, is judged the same: the victim gave it no score)
        if r.outcome == "rejected" or r.adversarial is None or r.victim_after is None or r.adversarial == r.original:
            return {"gold": False if r.gold_before is not None else None,
                    "beats_reference": False if r.direction == "R-" and reference_score is not None else None,
                    "expectation": False if r.direction == "R-" and cell is not None else None,
                    "invariance": False if r.direction == "R+" else None}
        out = dict(none)
        if r.gold_after is not None:
            out["gold"] = self.gold_verdict(r.direction, r.gold_after, r.victim_after)
        if r.direction == "R-" and reference_score is not None:
            out["beats_reference"] = self.at_least(r.victim_after, reference_score)
        if r.victim_before is not None:
            moved = abs(r.victim_after - r.victim_before) > self.invariance_tolerance
            if r.direction == "R+":
                out["invariance"] = moved
            else:
                if cell == "directional":
                    out["expectation"] = self.at_least(r.victim_after, r.victim_before)
                elif cell == "invariance":
                    out["expectation"] = moved
        return out
