"""One conversation, several rated contexts: what a split must keep together.

Some dialogue sets rate several turns of one conversation, each as its own context:

* growing prefixes: each context is the one before plus more turns (FED turn-level: 250 of its
  374 contexts extend another; a few in DailyDialog-Zhao, PersonaChat-Zhao and the USR sets);
* sliding windows: ConTurE-turn's contexts are three turns that move on two at a time,
  ``(t1, t2, t3) -> t4`` then ``(t3, t4, t5) -> t6``, so a rated reply opens the next window.

Splitting by the exact context puts turns of one conversation on both sides: a held-out rated
reply is a turn of a train context, and self-supervised pre-training
(:mod:`robusteval.training.ssl`) learns it, after its own preceding turn, as a positive.

:func:`conversation_groups` joins two rated contexts when one is a proper prefix of the other,
or when the later one begins with the earlier one's last turn(s) followed by its rated reply (a
window that moved on). A group's key is its shortest context (the first by
length, then text), recorded as ``meta["conversation"]`` on every sample of a group of two or
more contexts by :func:`mark_conversations`. :meth:`robusteval.types.Sample.conversation_key`
reads it and falls back to the context, so a context that joins no other keeps the key, and
the split, it had before. Contexts that only share an opening turn are not joined, unless that turn is itself a rated
context (below).
A conversation key the data gives (a file's conversation-id column) is kept, and a row without
one takes the id of its context or group, so a conversation is never split by a missing id.
A rated context that opens several dialogues (ConTurE-turn rates "Hello" with 22 replies, each
the start of another dialogue) joins them all: such a group is larger than one conversation,
which costs split balance, never a leak.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace

from robusteval.types import Sample

KEY = "conversation"


def _find(parent: dict[tuple[str, ...], tuple[str, ...]], c: tuple[str, ...]) -> tuple[str, ...]:
    root = c
    while parent[root] != root:
        root = parent[root]
    while parent[c] != root:  # path compression
        parent[c], c = root, parent[c]
    return root


def _earlier(a: tuple[str, ...], b: tuple[str, ...]) -> bool:
    return (len(a), a) < (len(b), b)


def conversation_groups(pairs: Iterable[tuple[tuple[str, ...], str]]) -> dict[tuple[str, ...], tuple[str, ...]]:
    """Each rated context of ``pairs`` ((context, rated reply)) -> the shortest context of its
    conversation (itself when it joins no other). Deterministic, whatever the order of ``pairs``."""
    pairs = [(c, r) for c, r in pairs if c]
    parent = {c: c for c, _ in pairs}
    opening: dict[tuple[str, ...], list[tuple[str, ...]]] = {}  # the first k >= 2 turns -> contexts
    for c in parent:
        for k in range(2, len(c) + 1):
            opening.setdefault(c[:k], []).append(c)

    def union(a: tuple[str, ...], b: tuple[str, ...]) -> None:
        a, b = _find(parent, a), _find(parent, b)
        if a != b:
            if _earlier(b, a):
                a, b = b, a
            parent[b] = a  # the root is always the group's shortest context

    for c in parent:
        for k in range(1, len(c)):
            if c[:k] in parent:
                union(c, c[:k])
    for c, reply in pairs:
        turns = (*c, reply)
        for k in range(2, len(turns) + 1):
            for later in opening.get(turns[-k:], ()):
                union(c, later)
    return {c: _find(parent, c) for c in parent}


def mark_conversations(samples: Sequence[Sample]) -> list[Sample]:
    """``samples`` with ``meta["conversation"]`` set where a context joins another context of
    the same list (:func:`conversation_groups`; dialogue samples only, others are returned as is)."""
    root = conversation_groups((s.context, s.response) for s in samples if s.task == "dialogue" and s.context)
    grouped = {c for c, r in root.items() if r != c} | {r for c, r in root.items() if r != c}
    given: dict[tuple[str, ...], str] = {}  # a group's id from the data (the first in order, if several)
    for s in samples:
        if s.task == "dialogue" and s.context in root and s.meta.get(KEY):
            key = str(s.meta[KEY])
            r = root[s.context]
            given[r] = min(given.get(r, key), key)
    out: list[Sample] = []
    for s in samples:
        if s.task == "dialogue" and s.context in root and not s.meta.get(KEY):
            r = root[s.context]
            if r in given:  # a row without the data's id joins its context's or group's id
                s = replace(s, meta={**s.meta, KEY: given[r]})
            elif s.context in grouped:
                s = replace(s, meta={**s.meta, KEY: "\n".join(r)})
        out.append(s)
    return out


def unmarked(samples: Sequence[Sample]) -> list[Sample]:
    """``samples`` without the conversation mark: keyed, split and resampled by their exact
    context, as every run of code before 47adb2f (2026-11-26) split them (to reproduce an old
    run's test split)."""
    return [replace(s, meta={k: v for k, v in s.meta.items() if k != KEY}) if KEY in s.meta else s for s in samples]
