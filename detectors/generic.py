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
  (:func:`word_count`), so "我今天下午去公园散步了" counts as six words, not one; a number
  inside such a run is skipped, not taken to void it ("现在大约40岁" has three content words).

For dialogue responses only by default (``tasks``); a short summary is not "generic" in this
sense, so other tasks get 0 and are counted as ``not_applicable``.
"""

from __future__ import annotations

import functools
import json
import re
import unicodedata
from typing import Any, ClassVar

from robusteval.detectors.base import Detector, register_detector

from robusteval.paths import resource
from robusteval.text import words
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


# Scripts written without spaces between words: a "word" of robusteval.text.words is a whole
# phrase or sentence there. Its word count is estimated from its length: about two characters
# per word for Chinese and Japanese, about four code points (consonants plus vowel signs) per
# word for the Southeast Asian scripts. An approximation, documented as one; it only has to
# tell a one-word reply from a sentence.
_CHARS_PER_WORD = {"CJK": 2.0, "HIRAGANA": 2.0, "KATAKANA": 2.0, "THAI": 4.0, "LAO": 4.0, "KHMER": 4.0,
                   "MYANMAR": 4.0}


def _unsegmented(ch: str) -> float | None:
    return _CHARS_PER_WORD.get(unicodedata.name(ch, "").split(" ", 1)[0])


def word_count(token: str) -> int:
    """Words in one token of :func:`robusteval.text.words`: 1, or the length-based estimate for a
    run of an unsegmented script (a mixed token counts its spaced part as one word)."""
    seg = unseg = 0.0
    for ch in token:
        per = _unsegmented(ch)
        if per is None:
            seg = 1.0
        else:
            unseg += 1.0 / per
    return max(1, round(seg + unseg))


_DIGITS = re.compile(r"\d+")


def content_count(token: str) -> int:
    """Content words in one token of :func:`robusteval.text.words`. A spaced word is one content
    word or none (a number, a stop word). A run of an unsegmented script is a whole phrase, so a
    digit inside it ("现在大约40岁", "about 40 now") must not void the phrase: its runs of
    non-digits are counted, each by :func:`word_count`."""
    if not any(_unsegmented(ch) for ch in token):
        return 1 if _content(token) else 0
    return sum(word_count(part) for part in _DIGITS.split(token) if part and _content(part))


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
    # 2: a number inside a run of an unsegmented script no longer voids the run's content words
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
