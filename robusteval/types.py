"""Core data types shared by every stage (DESIGN.md, "Core contracts")."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
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

    def conversation_key(self) -> str:
        """What a train/val/test split keeps together: the conversation this context belongs to
        (``meta["conversation"]``, set by :func:`robusteval.data.load` where a dataset rates
        several turns of one dialogue: growing prefixes or sliding windows,
        :mod:`robusteval.data.conversations`; or a file's conversation-id column), else the context."""
        conv = self.meta.get("conversation")
        return str(conv) if conv else self.context_key()

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


def samples_from_lists(predictions: Sequence[str], references: Sequence[Any] | None = None,
                       sources: Sequence[Any] | None = None, *, task: str | None = None,
                       ids: Sequence[str] | None = None, facts: Sequence[str | None] | None = None,
                       answers: Sequence[str | None] | None = None) -> list[Sample]:
    """Samples from parallel lists, the way Hugging Face ``evaluate`` takes its inputs: the one
    place lists become :class:`Sample` (``Metric.compute``, reward functions, plain-function metrics).

    * ``predictions``: the texts under evaluation, one string per item;
    * ``references``: per item a string, a list of strings (several references: the first is
      the main one, ``Sample.reference``; the rest go to ``Sample.references``) or None;
    * ``sources``: per item the document (a string) or the dialogue context as a list of turns,
      oldest first (``["Hi!", "Hello, how are you?"]``); with ``task="dialogue"`` a string is
      split into turns on newlines, as the file loader does; None for no source;
    * ``task``: one of :data:`TASKS`; by default ``dialogue`` when some source is a list of
      turns, else ``summarization``;
    * ``ids``: unique sample ids (default: the item's index, ``"0"``, ``"1"``...), so an error
      about an item names its index; ``facts`` / ``answers``: the ``fact`` and ``answer`` fields.

    A list of the wrong length, or an item of the wrong type, is an :class:`InputError` /
    :class:`RobustevalError` naming the list and the item.
    """
    from robusteval.errors import InputError, RobustevalError

    preds = _as_list("predictions", predictions)
    n = len(preds)
    refs = _as_list("references", references, n)
    srcs = _as_list("sources", sources, n)
    names = [str(i) for i in _as_list("ids", ids, n)] if ids is not None else [str(i) for i in range(n)]
    if len(set(names)) != n:
        dup = next(x for x in names if names.count(x) > 1)
        raise RobustevalError(f"ids must be unique; {dup!r} appears {names.count(dup)} times")
    fact_list, answer_list = _as_list("facts", facts, n), _as_list("answers", answers, n)
    if task is None:
        task = "dialogue" if any(isinstance(s, list | tuple) for s in srcs if s is not None) else "summarization"
    if task not in TASKS:
        raise RobustevalError(f"task must be one of {', '.join(TASKS)}, got {task!r}")

    def texts(value: Any, sid: str, field: str) -> tuple[str, ...]:
        if value is None:
            return ()
        if isinstance(value, str):
            if field == "context" and task == "dialogue":
                return tuple(t.strip() for t in value.split("\n") if t.strip())
            return (value,)
        if not isinstance(value, list | tuple):
            raise InputError(sid, field, f"expected a string or a list of strings, got {type(value).__name__}")
        for j, v in enumerate(value):
            if not isinstance(v, str):
                raise InputError(sid, field, f"element {j} is {type(v).__name__}, not a string")
        return tuple(value)

    def optional(value: Any, sid: str, field: str) -> str | None:
        if value is not None and not isinstance(value, str):
            raise InputError(sid, field, f"expected a string or None, got {type(value).__name__}")
        return value

    out = []
    for i, (sid, pred, ref, src, fact, ans) in enumerate(zip(names, preds, refs, srcs, fact_list, answer_list,
                                                             strict=True)):
        if not isinstance(pred, str):
            raise InputError(sid, "response", f"predictions[{i}] is {type(pred).__name__}, not a string")
        ref_texts = texts(ref, sid, "reference")
        out.append(Sample(id=sid, task=task, response=pred, context=texts(src, sid, "context"),
                          reference=ref_texts[0] if ref_texts else None, references=ref_texts[1:],
                          fact=optional(fact, sid, "fact"), answer=optional(ans, sid, "answer"),
                          meta={"index": i}))
    return out


def _as_list(name: str, values: Iterable[Any] | None, n: int | None = None) -> list[Any]:
    """``values`` as a list (None: ``n`` Nones); a bare string or a length other than ``n`` is an error."""
    from robusteval.errors import RobustevalError

    if values is None:
        return [None] * (n or 0)
    if isinstance(values, str | bytes | Mapping) or not isinstance(values, Iterable):
        raise RobustevalError(f"{name} must be a list (one item per prediction), got {type(values).__name__}")
    out = list(values)
    if n is not None and len(out) != n:
        raise RobustevalError(f"{name} has {len(out)} items but predictions has {n}: give one per prediction"
                              + (" (a list of strings per item for several references)"
                                 if name == "references" else ""))
    return out
