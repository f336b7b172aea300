"""Text preprocessing a protocol asks for before attacking.

``detokenize``: Vasselli & Watanabe (§3.1) received DailyDialog "pretokenized and lowercased"
and "detokenized and truecased [it] using regular expressions" before scoring, since several
metrics expect ordinary text. :func:`detokenize_truecase` is robusteval's version of those
rules (the paper does not list its own): spaces before punctuation and inside contractions
are removed, the pronoun "i" and the first letter of each sentence are upper-cased.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from robusteval.types import Sample

PREPROCESSING = ("none", "detokenize")
_RULES = [
    (re.compile(r"\s+([.,!?;:%)\]}。，！？、；：।؟،])"), r"\1"),  # "fine ." -> "fine."
    (re.compile(r"([(\[{$])\s+"), r"\1"),  # "( a" -> "(a"
    (re.compile(r"(\w)\s+(n't)\b", re.IGNORECASE), r"\1\2"),  # "do n't" -> "don't"
    (re.compile(r"(\w)\s+'\s*(s|m|re|ve|ll|d)\b", re.IGNORECASE), r"\1'\2"),  # "i 'm" -> "i'm"
    (re.compile(r"(\w)n\s+'\s*t\b", re.IGNORECASE), r"\1n't"),  # "don 't" -> "don't"
    (re.compile(r"\s+'\s*(?=\W|$)"), "'"),
    (re.compile(r"\s{2,}"), " "),
]
_PRONOUN_I = re.compile(r"\bi(?=\b|')")
_SENTENCE_START = re.compile(r"(^|[.!?]\s+)([^\W\d_])")


def detokenize_truecase(text: str) -> str:
    """``"i 'm fine . how are you ?"`` -> ``"I'm fine. How are you?"``."""
    out = text.strip()
    for pattern, repl in _RULES:
        out = pattern.sub(repl, out)
    out = _PRONOUN_I.sub("I", out)
    return _SENTENCE_START.sub(lambda m: m.group(1) + m.group(2).upper(), out)


def preprocess(samples: Sequence[Sample], mode: str | None) -> list[Sample]:
    """The samples with ``mode`` applied to the response, the context turns and the references."""
    mode = mode or "none"
    if mode not in PREPROCESSING:
        raise ValueError(f"preprocess must be one of {PREPROCESSING}, got {mode!r}")
    if mode == "none":
        return list(samples)
    f = detokenize_truecase
    return [replace(s, response=f(s.response), context=tuple(f(t) for t in s.context),
                    reference=f(s.reference) if s.reference is not None else None,
                    references=tuple(f(r) for r in s.references),
                    meta={**s.meta, "preprocess": mode}) for s in samples]
