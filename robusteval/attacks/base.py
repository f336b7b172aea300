"""The Attack contract (DESIGN.md): ``run(sample, victim, budget) -> AttackResult``.

Directions: ``R+`` — the text stays good, a sound victim keeps scoring it high;
``R-`` — the text becomes bad, a sound victim scores it low. Static perturbations
(:class:`Perturbation`) rewrite the response without looking at the victim; search attacks
query it through a :class:`robusteval.attacks.victim.CachedVictim`.
"""

from __future__ import annotations

import random
import time
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

from robusteval.types import Sample

DIRECTIONS = ("R+", "R-")


@dataclass
class AttackResult:
    """One attack on one sample: texts, scores, success under each criterion, cost."""

    attack: str
    family: str
    sample_id: str
    direction: str
    original: str
    adversarial: str | None
    expected: str  # "high" (R+) or "low" (R-)
    applicable: bool = True
    note: str = ""
    victim_before: float | None = None
    victim_after: float | None = None
    gold_before: float | None = None
    gold_after: float | None = None
    success: dict[str, bool | None] = field(default_factory=dict)
    model_calls: int = 0
    cache_hits: int = 0
    wall_time: float = 0.0
    trace: list[dict[str, Any]] | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class Attack(ABC):
    """Base class: subclasses set the class attributes and implement :meth:`run`."""

    name: ClassVar[str] = "attack"
    family: ClassVar[str] = ""
    source: ClassVar[str] = ""
    direction: ClassVar[str] = "R-"
    targets: ClassVar[tuple[str, ...]] = ()  # quality aspects the attack should lower
    keeps: ClassVar[tuple[str, ...]] = ()  # aspects it must not move
    needs_victim: ClassVar[bool] = False
    needs_llm: ClassVar[bool] = False
    tasks: ClassVar[tuple[str, ...]] = ("dialogue", "summarization", "question_generation",
                                        "data_to_text", "fact")

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.direction not in DIRECTIONS:
            raise TypeError(f"{cls.__name__}.direction must be one of {DIRECTIONS}, not {cls.direction!r}")

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed

    def rng(self, sample: Sample) -> random.Random:
        """A generator seeded by (attack seed, attack name, sample id): reproducible per sample."""
        return random.Random(f"{self.seed}|{self.name}|{sample.id}")

    @abstractmethod
    def run(self, sample: Sample, victim: Any = None, budget: int | None = None) -> AttackResult:
        """Attack ``sample``; ``victim`` is a CachedVictim when ``needs_victim``."""

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "family": self.family, "source": self.source,
                "direction": self.direction, "targets": list(self.targets),
                "keeps": list(self.keeps), "needs_victim": self.needs_victim,
                "needs_llm": self.needs_llm, "tasks": list(self.tasks),
                "summary": (type(self).__doc__ or "").strip().splitlines()[0]}


class Perturbation(Attack):
    """A static rewrite of the response; ``perturb`` returns None when it does not apply
    (e.g. no stop word to remove), which the runner reports as not applicable."""

    @abstractmethod
    def perturb(self, sample: Sample, rng: random.Random) -> str | None:
        """The adversarial response, or None if the perturbation cannot change this sample."""

    def run(self, sample: Sample, victim: Any = None, budget: int | None = None) -> AttackResult:
        start = time.perf_counter()
        adv = self.perturb(sample, self.rng(sample))
        applicable = adv is not None and adv.strip() != "" and adv != sample.response
        result = AttackResult(
            attack=self.name, family=self.family, sample_id=sample.id, direction=self.direction,
            original=sample.response, adversarial=adv if applicable else None,
            expected="high" if self.direction == "R+" else "low", applicable=applicable,
            note="" if applicable else "perturbation does not change this sample",
        )
        result.wall_time = time.perf_counter() - start
        return result
