"""Self-supervised pre-training data for dialogue evaluators, the way USR, GRADE and PoE train
their response scorers before (or instead of) human labels.

Every dialogue context of the named datasets yields positives: each turn given the turns
before it (human-written continuations), target 1. Each positive gets ``per_positive``
negatives, target 0, paired with the positive for the margin loss (the positive must score
``margin`` above each of its negatives). The negative kinds:

* ``random`` — a turn from another dialogue (USR's MLM/retrieval negatives, GRADE's and PoE's
  random responses);
* ``shuffled`` — the positive's words in a shuffled order (incoherent, same words);
* ``truncated`` — the positive cut to its first half of words (an unfinished reply);
* ``context_copy`` — the last context turn repeated as the reply (the degenerate reply that
  fools UniEval's coherence in Vasselli & Watanabe, §4);
* ``punctuation`` — one punctuation mark of the positive as the whole reply (".", "?", "。"):
  the content-free "master keys" that score high with reward models and LLM judges (Zhao et
  al. 2025, "One Token to Fool LLM-as-a-Judge", arXiv 2507.08794);
* ``opener`` — the positive's opening words only: its first clause when that ends within
  three words ("Well,", "Sure thing,"), else its first word. The dialogue form of Zhao et al.'s
  fix, which trains the reward model on responses cut to their content-free opening
  sentence, labelled negative. Replies of fewer than four words give none.

The kinds are drawn in rotation over the ``negatives`` list, so a kind named twice is drawn
twice as often: ``[random, shuffled, random, truncated]`` with two negatives per positive gives
every positive one random negative and one other (a quota for relevance).

``punctuation`` and ``opener`` are not in the default list (a config opts in): they are made
from human replies, never from an attack's key list, so an attack's word keys ("Thought
process:") stay unseen in training.

Contexts keep the split of the dataset they come from (a hash of dataset and conversation, as in
:func:`robusteval.training.data.split_of`), so a test context is never pre-trained on, nor is a
rated test reply that a train context of the same conversation (a longer prefix, a later window)
holds as a turn.
Deterministic for a seed.
"""

from __future__ import annotations

import random
import unicodedata
from collections.abc import Sequence
from typing import TYPE_CHECKING

from robusteval.errors import RobustevalError
from robusteval.types import Sample

if TYPE_CHECKING:
    from robusteval.training.data import Item

NEGATIVE_KINDS = ("random", "shuffled", "truncated", "context_copy", "punctuation", "opener")
DEFAULT_KINDS = ("random", "shuffled", "truncated", "context_copy")
OPENER_WORDS = 3  # the longest first clause an ``opener`` keeps


def is_punctuation(ch: str) -> bool:
    return unicodedata.category(ch).startswith("P")


def continuations(samples: Sequence[Sample]) -> list[Sample]:
    """(turns before, turn) pairs from every distinct context of ``samples``: only turns the
    dialogue's humans wrote, never the rated (possibly machine) responses."""
    out: list[Sample] = []
    seen: set[str] = set()
    for s in samples:
        key = s.context_key()
        if key in seen:
            continue
        seen.add(key)
        turns = [t for t in s.context if t.strip()]
        for k in range(1, len(turns)):
            out.append(Sample(id=f"{s.id}#ssl{k}", task="dialogue", response=turns[k], context=tuple(turns[:k]),
                              meta={"dataset": s.meta.get("dataset"), "ssl": "positive",
                                    "context_of": key, "conversation_of": s.conversation_key()}))
    return out


def learned_replies(rated: Sequence[Sample], positives: Sequence[Sample]) -> list[bool]:
    """For each rated sample: whether one of the pre-training ``positives`` (from
    :func:`continuations`) is its reply right after the end of its context (any suffix of it: a
    longer context, or a later window of the same dialogue, holds the two as consecutive turns).
    The split leak that :mod:`robusteval.data.conversations` closes; ``benchmarks/split_leak.py``
    measures it."""
    learned = {(p.context[-k:], p.response) for p in positives for k in range(1, len(p.context) + 1)}
    return [any((s.context[-k:], s.response) in learned for k in range(1, len(s.context) + 1)) for s in rated]


def negative(kind: str, pos: Sample, others: Sequence[Sample], rng: random.Random) -> str | None:
    """The text of one negative of ``kind`` for ``pos`` (None if it cannot be made)."""
    words = pos.response.split()
    if kind == "random":
        for _ in range(8):
            o = others[rng.randrange(len(others))]
            # another conversation: a turn of the same dialogue (another window) is no random reply
            if o.meta.get("conversation_of") != pos.meta.get("conversation_of") and o.response != pos.response:
                return o.response
        return None
    if kind == "shuffled":
        if len(set(words)) < 3:
            return None
        for _ in range(8):
            perm = words[:]
            rng.shuffle(perm)
            if perm != words:
                return " ".join(perm)
        return None
    if kind == "truncated":
        return " ".join(words[: len(words) // 2]) if len(words) >= 4 else None
    if kind == "context_copy":
        last = pos.context[-1] if pos.context else ""
        return last if last.strip() and last != pos.response else None
    if kind == "punctuation":
        marks = sorted({ch for ch in pos.response if is_punctuation(ch)})
        if not marks:
            return None
        mark = marks[rng.randrange(len(marks))]
        return None if mark == pos.response.strip() else mark  # a reply that is one mark is its own positive
    if kind == "opener":
        if len(words) < 4:
            return None
        for k, w in enumerate(words[:OPENER_WORDS]):
            if is_punctuation(w[-1]):
                return " ".join(words[: k + 1])
        return words[0]
    raise RobustevalError(f"unknown negative kind {kind!r} (known: {', '.join(NEGATIVE_KINDS)})")


def ssl_items(positives: Sequence[Sample], dataset: str, kinds: Sequence[str], per_positive: int,
              seed: int) -> list[Item]:
    """Positives (target 1) and their negatives (target 0, paired with the positive)."""
    from robusteval.training.data import Item

    bad = [k for k in kinds if k not in NEGATIVE_KINDS]
    if bad or not kinds:
        raise RobustevalError(f"self-supervised negatives must be among {NEGATIVE_KINDS}, got {list(kinds)}")
    if per_positive < 1:
        raise RobustevalError("per_positive must be >= 1")
    rng = random.Random(seed)
    items: list[Item] = []
    for i, pos in enumerate(positives):
        items.append(Item(pos, 1.0, "ssl+", dataset))
        made = 0
        for j in range(len(kinds)):
            if made == per_positive:
                break
            kind = kinds[(i * per_positive + j) % len(kinds)]  # kinds in rotation, so all appear evenly
            text = negative(kind, pos, positives, rng)
            if text is None or not text.strip():
                continue
            items.append(Item(pos.with_response(text, ssl=kind), 0.0, "ssl-", dataset, original=pos, family=kind))
            made += 1
    return items
