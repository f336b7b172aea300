"""Core data types shared by every stage (DESIGN.md, "Core contracts")."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

TASKS = ("dialogue", "summarization", "question_generation", "data_to_text", "fact")


@dataclass(frozen=True)
class HumanScale:
    """The range of one human-judgment aspect as the dataset defines it."""

    low: float
    high: float

    def normalize(self, value: float) -> float:
        """Map ``value`` from this scale to [0, 1]."""
        if self.high == self.low:
            raise ValueError("degenerate human scale")
        return (value - self.low) / (self.high - self.low)

    def to_dict(self) -> dict[str, float]:
        return {"low": self.low, "high": self.high}


@dataclass(frozen=True)
class Sample:
    """One text under evaluation, with everything a metric or attack may need.

    ``context`` keeps dialogue turns as separate elements; a document is one element.
    ``human`` maps aspect -> score on the dataset's own scale; ``meta["scales"]`` records
    that scale per aspect (see :class:`HumanScale`).
    """

    id: str
    task: str
    response: str
    context: tuple[str, ...] = ()
    reference: str | None = None
    references: tuple[str, ...] = ()
    fact: str | None = None
    answer: str | None = None
    human: Mapping[str, float] = field(default_factory=dict)
    meta: Mapping[str, Any] = field(default_factory=dict)

    def all_references(self) -> tuple[str, ...]:
        """``reference`` followed by any other ``references`` (deduplicated, order kept)."""
        refs: list[str] = []
        for r in ((self.reference,) if self.reference is not None else ()) + self.references:
            if r not in refs:
                refs.append(r)
        return tuple(refs)

    def with_response(self, response: str, **meta: Any) -> Sample:
        """A copy with another response (what an attack produces)."""
        new_meta = dict(self.meta)
        new_meta.update(meta)
        return replace(self, response=response, meta=new_meta)

    def context_key(self) -> str:
        """What identifies this sample's context: rated responses of the same dialogue context
        (or document) share it, so splits, intervals and bootstraps resample by it."""
        return "\n".join(self.context) if self.context else self.id

    def source_text(self) -> str:
        """The context as one string: turns joined by newlines, a document as is."""
        return "\n".join(self.context)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "task": self.task,
            "context": list(self.context),
            "response": self.response,
            "reference": self.reference,
            "references": list(self.references),
            "fact": self.fact,
            "answer": self.answer,
            "human": dict(self.human),
            "meta": dict(self.meta),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Sample:
        return cls(
            id=str(d["id"]),
            task=str(d["task"]),
            response=str(d["response"]),
            context=tuple(d.get("context") or ()),
            reference=d.get("reference"),
            references=tuple(d.get("references") or ()),
            fact=d.get("fact"),
            answer=d.get("answer"),
            human=dict(d.get("human") or {}),
            meta=dict(d.get("meta") or {}),
        )
