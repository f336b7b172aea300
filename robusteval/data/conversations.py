"""One conversation, several rated contexts: what a split must keep together.

Some dialogue sets rate several turns of one conversation, each as its own context, and each
context is a prefix of the next (ConTurE-turn: 129 of its 1,013 contexts extend another; FED
turn-level: 250 of 374; a few in DailyDialog-Zhao, PersonaChat-Zhao, PersonaChat-USR and
Topical-Chat-USR). Splitting by the exact context then puts turns of one conversation on both
sides: a test context's rated (context, reply) pair is the first turns of a longer train
context, and self-supervised pre-training (:mod:`robusteval.training.ssl`) learns that very
pair as a positive.

:func:`mark_conversations` joins every context with each rated context it extends (the
transitive closure of "is a proper prefix of") and records the group's shortest context as
``meta["conversation"]`` on every sample of a group of two or more contexts.
:meth:`robusteval.types.Sample.conversation_key` reads it and falls back to the context, so a
context that shares no prefix keeps the key, and the split, it had before. A conversation key a
loader sets itself (a real dialogue id) is kept.
"""

from __future__ import annotations

from collections.abc import Sequence
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


def conversation_groups(contexts: Sequence[tuple[str, ...]]) -> dict[tuple[str, ...], tuple[str, ...]]:
    """Each context -> the shortest context of its conversation (itself when it extends no
    other context and none extends it). Deterministic: ties go to the lexicographically first."""
    parent = {c: c for c in contexts if c}
    for c in parent:
        for k in range(1, len(c)):
            prefix = c[:k]
            if prefix in parent:
                a, b = _find(parent, c), _find(parent, prefix)
                if a != b:
                    if _earlier(b, a):
                        a, b = b, a
                    parent[b] = a  # the root is always the group's shortest context
    return {c: _find(parent, c) for c in parent}


def mark_conversations(samples: Sequence[Sample]) -> list[Sample]:
    """``samples`` with ``meta["conversation"]`` set where a context extends, or is extended
    by, another context of the same list (dialogue samples only; others are returned as is)."""
    contexts = list(dict.fromkeys(s.context for s in samples if s.task == "dialogue" and s.context))
    root = conversation_groups(contexts)
    grouped = {c for c, r in root.items() if r != c} | {r for c, r in root.items() if r != c}
    out: list[Sample] = []
    for s in samples:
        if s.task == "dialogue" and s.context in grouped and KEY not in s.meta:
            s = replace(s, meta={**s.meta, KEY: "\n".join(root[s.context])})
        out.append(s)
    return out
