"""The Attack contract (DESIGN.md): ``run(sample, victim, budget) -> AttackResult``.

Directions: ``R+`` — the text stays good, a sound victim keeps scoring it high;
``R-`` — the text becomes bad, a sound victim scores it low. Static perturbations
(:class:`Perturbation`) rewrite the response without looking at the victim; search attacks
query it through a :class:`robusteval.attacks.victim.CachedVictim`.
"""

from __future__ import annotations

import functools
import hashlib
import json
import random
import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any, ClassVar

from robusteval.types import Sample

DIRECTIONS = ("R+", "R-")


ROW_SCHEMA = "robusteval.row/2"
OUTCOMES = ("attacked", "rejected", "skipped", "original_floored", "original_rejected")
COUNTED_OUTCOMES = ("attacked", "rejected")  # the ASR denominator


@dataclass
class ResultRow:
    """One attack on one sample: the single result-row type every stage writes and reads.

    ``outcome`` says how the row counts:

    * ``attacked`` — the attack ran; ``success`` holds a verdict per criterion. A search that
      exhausts its budget is *attacked and not fooled*: ``adversarial`` is its best candidate
      and ``victim_after`` that candidate's score (``meta["exhausted"]`` is True).
    * ``rejected`` — the attack ran and the victim's guard (policy ``reject``) refused its
      text: in the ASR denominator, fooled under no criterion; ``meta["guard"]`` says which
      detectors flagged it.
    * ``skipped`` — the attack cannot apply to this sample (no noun to change, no pool);
      ``note`` gives the reason. Only these rows leave the ASR denominator.
    * ``original_floored`` — a guarded victim already floored the clean original (a false
      positive of its guard), so no attack on it can be judged; reported apart.
    * ``original_rejected`` — the same for a guard with policy ``reject``: it refused the
      clean original.

    The row carries what a reader needs without side files: the dataset, the victim and its
    reproducibility string, the criteria (with their version) and the guard's details.
    """

    attack: str
    family: str
    sample_id: str
    direction: str
    original: str
    adversarial: str | None
    expected: str  # "high" (R+) or "low" (R-)
    outcome: str = "attacked"
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
    key: str = ""
    dataset: str | None = None
    victim: str | None = None
    victim_repro: str | None = None
    context_id: str | None = None
    criteria: dict[str, Any] | None = None
    schema: str = ROW_SCHEMA

    def __post_init__(self) -> None:
        if self.outcome not in OUTCOMES:
            raise ValueError(f"outcome must be one of {OUTCOMES}, got {self.outcome!r}")
        if self.direction not in DIRECTIONS:
            raise ValueError(f"direction must be one of {DIRECTIONS}, got {self.direction!r}")

    @property
    def applicable(self) -> bool:
        """True unless the attack could not apply (``skipped``)."""
        return self.outcome != "skipped"

    def skip(self, reason: str) -> ResultRow:
        """Mark the row skipped (the attack cannot apply), with the reason."""
        self.outcome, self.note, self.adversarial = "skipped", reason, None
        return self

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ResultRow:
        """The row back from its JSON form; rows of an older schema are refused by name."""
        if d.get("schema") != ROW_SCHEMA:
            raise ValueError(f"row schema {d.get('schema')!r} is not {ROW_SCHEMA!r} (written by an older "
                             "robusteval; rerun the attack into a new --out-dir)")
        names = {f.name for f in fields(cls)}
        unknown = set(d) - names
        if unknown:
            raise ValueError(f"unknown field(s) {sorted(unknown)}")
        return cls(**d)


AttackResult = ResultRow  # the name attacks construct their results with


# How much better another Latin-script language must score than English before an English-only
# attack skips a text without a declared language (robusteval.langid.language's margin). Measured
# 2026-11-24: at 1.3, 1 of about 9,000 undeclared English responses of the shipped data sets is
# read as another language (a restaurant name, "Mangia tutti ristorante , is moderate ."), against
# 20 at 1.0; of the first 400 xDial replies, 5 French, 5 German and 3 Spanish are read as English.
LANGUAGE_MARGIN = 1.3
# what an attack built on English resources declares as its languages (an English spaCy parser,
# WordNet, English word lists, TextAttack's English candidates)
ENGLISH: tuple[str, ...] = ("en",)


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
    # ISO 639-1 codes of the languages the attack's resources cover (an English spaCy parser,
    # WordNet, English word lists); () = any language
    languages: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.direction not in DIRECTIONS:
            raise TypeError(f"{cls.__name__}.direction must be one of {DIRECTIONS}, not {cls.direction!r}")
        init = cls.__dict__.get("__init__")
        if init is not None:  # record what the attack was built with (run fingerprints), once
            @functools.wraps(init)
            def recording_init(self: Attack, *args: Any, __init: Any = init, **kw: Any) -> None:
                if "_init_options" not in self.__dict__:
                    self.__dict__["_init_options"] = {"args": list(args), "kwargs": dict(kw)}
                __init(self, *args, **kw)

            cls.__init__ = recording_init  # type: ignore[method-assign]

    @property
    def init_options(self) -> dict[str, Any]:
        """The arguments the attack was constructed with (its settings, not its runtime state:
        a search's pool or a fitted trigger does not change which run it belongs to)."""
        return dict(self.__dict__.get("_init_options") or {"args": [], "kwargs": {}})

    def __init__(self, seed: int = 0) -> None:
        self.__dict__.setdefault("_init_options", {"args": [], "kwargs": {"seed": seed}})
        self.seed = seed

    def row_version(self, sample: Sample) -> str | None:
        """What this attack's row for ``sample`` was made from beyond the run's fingerprint, or
        None (nothing). The runner stores it in the row (``meta.input_version``) and a resume
        makes again a row whose version is not the attack's now. An attack fitted on other
        samples (a universal trigger) is made from its fitted state, which a resume fits again
        when a request failed while it was fitted; a transfer attack from the recorded texts it
        replays, which change when a recorded sample is attacked again."""
        state = getattr(self, "fitted_state", None)
        if not getattr(self, "needs_fit", False) or not callable(state):
            return None
        from robusteval.results import canonical

        # what is applied, not how the search got there: a fit done again after a failed request
        # has other scores in its history, and the same trigger attacks the same way
        applied = {k: v for k, v in state().items() if k != "history"}
        text = json.dumps(canonical(applied), ensure_ascii=False, sort_keys=True)
        return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]

    def language_text(self, sample: Sample) -> str:
        """The text the attack rewrites, whose language decides whether it applies: the
        response (an attack that rewrites the context says so by overriding this)."""
        return sample.response

    def unsupported(self, sample: Sample) -> str | None:
        """Why the attack cannot apply to this sample's language, or None when it can. The
        language is the sample's ``meta["language"]`` or, without one,
        :func:`robusteval.langid.language` of :meth:`language_text` with a margin of
        :data:`LANGUAGE_MARGIN`, so a short English reply that scores about as well in Italian
        ("ok .") stays English. A rule built on English resources would otherwise garble other
        languages (an English NER turning "Bonjour" into a place, "However," before a Hindi
        sentence) and count the garble as an attack."""
        if not self.languages:
            return None
        from robusteval.langid import sample_language

        lang = sample_language(sample, self.language_text(sample), margin=LANGUAGE_MARGIN)
        if lang in self.languages:
            return None
        return (f"{self.name} works on {'/'.join(self.languages)} text only (it is built on English "
                f"resources); this text is {lang}")

    def row(self, sample: Sample, **fields: Any) -> AttackResult:
        """A new result row of this attack on ``sample`` (its identity filled in; ``fields``
        set the rest, ``adversarial`` None unless given)."""
        fields.setdefault("adversarial", None)
        return AttackResult(attack=self.name, family=self.family, sample_id=sample.id, direction=self.direction,
                            original=sample.response, expected="high" if self.direction == "R+" else "low",
                            **fields)

    def skipped(self, sample: Sample, reason: str) -> AttackResult:
        """This attack's row for ``sample`` marked skipped with ``reason``."""
        return self.row(sample).skip(reason)

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
                "needs_llm": self.needs_llm, "tasks": list(self.tasks), "languages": list(self.languages),
                "summary": (type(self).__doc__ or "").strip().splitlines()[0]}


class OtherResponses:
    """For R- attacks that start from another context's response (AdvEval's baselines, Chen et
    al. 2024 §4): :meth:`prepare` (the runner calls it with the run's samples) keeps the pool,
    :meth:`other_response` draws one of them, seeded per sample."""

    pool: list[str]

    def prepare(self, samples: Sequence[Sample]) -> None:
        self.pool = [s.response for s in samples]

    def other_response(self, sample: Sample, rng: random.Random) -> str | None:
        """A response of another sample (None when the pool has no other response)."""
        others = [r for r in getattr(self, "pool", []) if r != sample.response]
        return rng.choice(others) if others else None


class Perturbation(Attack):
    """A static rewrite of the response; ``perturb`` returns None when it does not apply
    (e.g. no stop word to remove), which the runner records as ``skipped``."""

    @abstractmethod
    def perturb(self, sample: Sample, rng: random.Random) -> str | None:
        """The adversarial response, or None if the perturbation cannot change this sample."""

    def run(self, sample: Sample, victim: Any = None, budget: int | None = None) -> AttackResult:
        why = self.unsupported(sample)
        if why is not None:
            return self.skipped(sample, why)
        start = time.perf_counter()
        adv = self.perturb(sample, self.rng(sample))
        applicable = adv is not None and adv.strip() != "" and adv != sample.response
        result = self.row(sample, adversarial=adv if applicable else None,
                          outcome="attacked" if applicable else "skipped",
                          note="" if applicable else "perturbation does not change this sample")
        result.wall_time = time.perf_counter() - start
        return result
