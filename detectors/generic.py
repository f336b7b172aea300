"""[generic] Generic, low-information responses.

Vasselli & Watanabe (Table 2) replace the response with static strings ("Hello", "I don't
know", "I'm sorry, can you repeat?", "fantastic! how are you?"...) and find reference-free
metrics rating many of them above the human response; dull, context-independent replies are
the classic failure of neural dialogue systems (Li et al. 2016).

Two signals, the larger one is the suspicion:

* closeness to a list of generic responses (package data), as the best token-set Jaccard
  similarity after lower-casing and removing punctuation (1.0 for an exact match);
* lack of content: ``1 - content_words / 4`` for a response with fewer than four content words
  (not stop words, alphabetic), so a one-word reply like "Cucumber" scores 0.75 and a reply
  with four or more content words scores 0. In scripts written without spaces (Chinese,
  Japanese, Thai, Lao, Khmer, Myanmar) words are estimated from the length of each run
  (:func:`word_count`), so "我今天下午去公园散步了" counts as six words, not one. A number
  inside a token is skipped, not taken to void it (version 2): "现在大约40岁" has three
  content words, Korean "25살이에요" one.

For dialogue responses only by default (``tasks``); a short summary is not "generic" in this
sense, so other tasks get 0 and are counted as ``not_applicable``.
"""

from __future__ import annotations

import functools
import json
from typing import Any, ClassVar

from robusteval.detectors.base import Detector, register_detector

from robusteval.paths import resource
from robusteval.text import estimated_words, unsegmented, words
from robusteval.types import Sample


def _content(word: str) -> bool:
    # a word (letters, marks, an apostrophe: see robusteval.text.words) with no digit, not a stop word
    return any(c.isalpha() for c in word) and not any(c.isdigit() for c in word) and word not in _stop_words()


@functools.lru_cache(maxsize=1)
def generic_sets() -> tuple[frozenset[str], ...]:
    data = json.loads(resource("detectors/generic_responses.json").read_text(encoding="utf-8"))
    return tuple(frozenset(words(r)) for r in data["responses"] if words(r))


@functools.lru_cache(maxsize=1)
def _stop_words() -> frozenset[str]:
    from spacy.lang.en.stop_words import STOP_WORDS

    return frozenset(STOP_WORDS) | {"n't", "'s", "'m", "'re", "'ll", "'ve", "'d", "don't", "i'm", "it's"}


def word_count(token: str) -> int:
    """Words in one token of :func:`robusteval.text.words`: 1, or the length-based estimate for a
    run of an unsegmented script (a mixed token counts its spaced part as one word)."""
    return max(1, round(estimated_words(token)))


def content_count(token: str) -> int:
    """Content words in one token of :func:`robusteval.text.words`: its stretches between digits
    that are content (not a stop word), each :func:`word_count` words. A number inside a token
    does not void the token: a run of an unsegmented script is a whole phrase ("现在大约40岁",
    "about 40 now"), and Korean writes a number with its counter and particle ("25살이에요",
    "I'm 25"). Beside a number, a stretch of a spaced script needs three characters: "covid19"
    and "25살이에요" have one content word, "4pm", "2nd", "1960s", "15mg" none, as a lone number.
    Never more than the token's own :func:`word_count` (each stretch counts at least one word)."""
    parts = _digit_split(token)
    if len(parts) == 1:
        return word_count(token) if _content(token) else 0
    content = sum(word_count(part) for part in parts
                  if _content(part) and (len(part) >= 3 or any(unsegmented(ch) for ch in part)))
    return min(content, word_count(token))


def _digit_split(token: str) -> list[str]:
    # str.isdigit, as _content uses it: superscripts and circled numbers ("m²", "①") are digits
    # there and not to regex's \d
    parts, cur = [], []
    for ch in token:
        if ch.isdigit():
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return parts


def features(text: str) -> dict[str, Any]:
    w = words(text)
    ws = set(w)
    best = max((len(ws & g) / len(ws | g) for g in generic_sets()), default=0.0) if ws else 0.0
    content = sum(content_count(x) for x in w)
    return {"generic_similarity": best, "content_words": content, "words": sum(word_count(x) for x in w)}


@register_detector
class Generic(Detector):
    """Generic, low-information responses (Vasselli & Watanabe, Table 2; Li et al. 2016)."""

    name: ClassVar[str] = "generic"
    family: ClassVar[str] = "dialogue"
    source: ClassVar[str] = ("Vasselli & Watanabe, Adversarial Evaluation of Dialogue System Metrics, Table 2; "
                             "Li et al. 2016, A Diversity-Promoting Objective Function for Neural Conversation Models")
    default_threshold: ClassVar[float] = 0.75
    reads: ClassVar[tuple[str, ...]] = ("task", "response")
    # 2: a number inside a token no longer voids the token's content words
    version: ClassVar[int] = 2

    def __init__(self, tasks: tuple[str, ...] | list[str] = ("dialogue",), min_content: int = 4,
                 threshold: float | None = None) -> None:
        super().__init__(threshold)
        self.tasks = tuple(tasks)
        self.min_content = min_content

    def signature(self) -> str:
        return f"tasks={','.join(self.tasks)},min_content={self.min_content}"

    def _analyze(self, samples: list[Sample]) -> list[dict[str, Any]]:
        rows = []
        for s in samples:
            if s.task not in self.tasks:
                # counted by Detector.analyze once per sample (memo hits included)
                rows.append({"applicable": False, "suspicion": 0.0, "fallback": "not_applicable"})
                continue
            f = features(s.response)
            low_content = max(0.0, 1.0 - f["content_words"] / self.min_content)
            rows.append({**f, "applicable": True, "suspicion": max(f["generic_similarity"], low_content)})
        return rows
