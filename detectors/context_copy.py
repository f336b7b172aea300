"""[context_copy] Overlap of a dialogue response with the last utterance and the whole context.

Vasselli & Watanabe (Table 2, "previous utterance" and "previous-utterance prefix") found that
copying the last turn into the response fooled UniEval more than any other attack; robusteval
measures the same against overlap-with-context metrics (BENCHMARKS.md §5: 94-100 % ASR).

Features, on the tokens of the texts' skeletons (case-folded, lookalike letters read as
Latin, invisible characters dropped; punctuation ignored; a word keeps its combining marks, so
Devanagari words are not split at their vowel signs; a script written without spaces is read
character by character, each with its marks: :func:`units`, version 5): the share of the
response's n-grams (n = 1..3) found in the last utterance and in the whole context, and the
longest common run of tokens with the last utterance relative to the response and to the last
utterance. Lengths that decide which rule applies are in words, estimated for the scripts read
by character (:func:`word_length`).
Suspicion is the largest of: trigram containment in the last turn, the longest common substring
covering most of the last turn (a verbatim copy or prefix), and 0.8 x trigram containment in
the whole context.

A response too short for a trigram (under three words; in Chinese about six characters) is
judged on the copy of the last turn alone (version 2). Version 1 fell back to *word* containment
there, and an echo question is natural dialogue: "¿qué pasó?" after "¿no sabes lo que pasó?", or
a two-word reply whose words both occur somewhere earlier, scored 0.8-1.0, as high as a copied
turn. On the 306 well-rated DailyDialog-Zhao replies that put the calibrated default threshold
above 1 (never firing, even on a verbatim copy) in French, Arabic, Hindi and the CJK group
(BENCHMARKS §9b).

The comparison ignores how a text was tokenized (version 3). DailyDialog and other corpora
store their turns tokenized ("i 'm sorry .", "it does n't", "couldn ' t"), while a reply --
an attack's copy of the last turn, or a system's -- is written normally ("I'm sorry.",
"doesn't"). Version 2 split the tokenized forms into extra words ("i", "m"), so a verbatim copy
of the last turn scored 0-0.97 instead of 1.0: of the 100 `previous-utterance` attacks on
DailyDialog-Zhao, 37 scored below 1.0 and 27 fell under the shipped English threshold. Split
English clitics ('s 'm 'd 't 're 've 'll, n't) and French elisions (l' d' j' qu' ...) are joined
to their word on both sides before the words are compared (:func:`detokenize`).

Apostrophe-like characters are one apostrophe (version 4). Version 3 joined a split clitic
written with ``'``, ``’``, U+02BC or a backtick ("does n`t"), but otherwise the words read a
backtick, ``‘`` or an acute accent as a word break ("s`est" -> "s", "est"; the skeleton's NFKC
turns "´" into a space and a combining mark) and U+02BC as a letter ("sʼest" stayed one word,
unequal to "s'est"), and it joined a French elision only after a one-letter word or "qu" with no
space before the apostrophe: "lorsqu' il", "aujourd ' hui", "l ’ homme" stayed two words. The
characters of :data:`APOSTROPHES` are read as ``'`` first now, and the elisions of lorsqu',
puisqu', jusqu', quoiqu', presqu' and aujourd' are joined, with or without spaces around the
apostrophe. A one-letter word between spaced quotes is joined too ("rock ' n ' roll" ->
"rock", "n'roll"), as its written form ("rock 'n' roll") already was: a tokenized copy and a
written one agree. Letters that look like apostrophes (the Hawaiian ʻokina U+02BB, the saltillo
U+A78C) are left alone.

Only dialogue samples have a conversational context; for other tasks (a summary should
overlap its source) the detector returns 0 and counts the sample as ``not_applicable``.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any, ClassVar

from robusteval.detectors.base import Detector, register_detector
from robusteval.detectors.sanitize import skeleton

from robusteval.text import estimated_words, unsegmented, words
from robusteval.types import Sample

# in estimated words (word_length; a trigram of words, about six Chinese characters): shorter
# responses are judged on copying the last turn only
MIN_CONTAINMENT_WORDS = 3
# read as "'" before anything else: right / left / reversed single quotation marks, modifier
# letter apostrophe, modifier prime, grave accent (backtick), acute accent, Greek oxia, prime,
# reversed prime, full-width apostrophe
APOSTROPHES = "\u2019\u2018\u201b\u02bc\u02b9`\u00b4\u1ffd\u2032\u2035\uff07"
TO_APOSTROPHE = str.maketrans(dict.fromkeys(APOSTROPHES, "'"))
APOSTROPHE = "'"
# "do n't", "ca n ' t" -> "don't", "can't"; then "i 'm", "couldn ' t", "it ' s" -> "i'm", "couldn't", "it's"
SPLIT_NEGATION = re.compile(rf"(\w)\s+n\s*{APOSTROPHE}\s*t\b")
SPLIT_CLITIC = re.compile(rf"(\w)\s*({APOSTROPHE})\s*(s|m|d|t|re|ve|ll)\b")
# French elision with a space after (and maybe before) the apostrophe: "l' homme", "qu ' il",
# "lorsqu' il", "aujourd ' hui" -> "l'homme", "qu'il", "lorsqu'il", "aujourd'hui"
ELIDED = "lorsqu|puisqu|jusqu|quoiqu|presqu|aujourd|qu|[cdjlmnst]"
SPLIT_ELISION = re.compile(rf"\b({ELIDED})\s*{APOSTROPHE}\s+(?=\w)")


def detokenize(text: str) -> str:
    """``text`` (case-folded) with every apostrophe written ``'`` and split clitics and elisions
    joined to their word: a tokenized turn and the same turn written normally, with any of the
    apostrophes in :data:`APOSTROPHES`, give the same words."""
    text = text.translate(TO_APOSTROPHE)
    text = SPLIT_NEGATION.sub(r"\1n't", text)
    text = SPLIT_CLITIC.sub(r"\1'\3", text)
    return SPLIT_ELISION.sub(r"\1'", text)


def tokens(text: str) -> list[str]:
    """Words (:func:`robusteval.text.words`) of the text's
    :func:`~robusteval.detectors.sanitize.skeleton`, detokenized (:func:`detokenize`): a copy
    disguised with lookalike letters, zero-width spaces, case changes, other apostrophes or
    another tokenization is still a copy. The apostrophes are read before the skeleton, whose
    NFKC would turn an acute accent into a space and a combining mark. A word of a script
    written without spaces is a whole phrase there, so it is cut into characters (each with its
    combining marks, :func:`units`; version 5)."""
    return [u for w in words(detokenize(skeleton(text.translate(TO_APOSTROPHE)))) for u in units(w)]


def units(word: str) -> list[str]:
    """``word`` (of :func:`robusteval.text.words`) as compared: whole, or, where it holds
    characters of a script written without spaces (Chinese, Japanese, Thai...), each such
    character with the marks after it on its own and each stretch of other characters whole
    ("现在40岁" -> 现, 在, 40, 岁). Version 4 compared each phrase between punctuation whole: a copy
    of a Chinese turn with one character changed lost every n-gram that held the changed phrase
    and scored 0.0 (English 0.92)."""
    if word.isascii() or not any(unsegmented(ch) for ch in word):
        return [word]
    out: list[str] = []
    other = ""
    for ch in word:
        if unicodedata.category(ch)[0] == "M" and not other and out:
            out[-1] += ch  # a vowel sign or tone mark stays with its consonant
        elif unsegmented(ch) is not None:
            if other:
                out.append(other)
                other = ""
            out.append(ch)
        else:
            other += ch
    if other:
        out.append(other)
    return out


def word_length(toks: list[str]) -> float:
    """About how many words ``toks`` (of :func:`tokens`) hold: a character of an unsegmented
    script is a fraction of one (:func:`robusteval.text.estimated_words`)."""
    return sum(estimated_words(t) for t in toks)


def ngrams(toks: list[str], n: int) -> list[tuple[str, ...]]:
    return [tuple(toks[i:i + n]) for i in range(len(toks) - n + 1)]


def containment(resp: list[str], other: list[str], n: int) -> float:
    """Share of the response's n-grams that occur in ``other``."""
    r = ngrams(resp, n)
    if not r:
        return 0.0
    pool = set(ngrams(other, n))
    return sum(g in pool for g in r) / len(r)


def longest_common_run(a: list[str], b: list[str]) -> tuple[int, int]:
    """The longest common run of tokens of ``a`` and ``b``: its length and where it ends in
    ``a`` (dynamic programming, O(len a x len b))."""
    best = end = 0
    prev = [0] * (len(b) + 1)
    for i, x in enumerate(a, 1):
        cur = [0] * (len(b) + 1)
        for j, y in enumerate(b, 1):
            if x == y:
                cur[j] = prev[j - 1] + 1
                if cur[j] > best:
                    best, end = cur[j], i
        prev = cur
    return best, end


@register_detector
class ContextCopy(Detector):
    """Copying of the last utterance / the context into the response (Vasselli & Watanabe, Table 2)."""

    name: ClassVar[str] = "context_copy"
    family: ClassVar[str] = "dialogue"
    source: ClassVar[str] = "Vasselli & Watanabe, Adversarial Evaluation of Dialogue System Metrics, Table 2"
    default_threshold: ClassVar[float] = 0.6
    # 2: words with their combining marks; no word containment for 1-2 words. 3: tokenization
    # ignored. 4: apostrophe-like characters read as "'", long and spaced French elisions joined.
    # 5: unsegmented scripts compared character by character, lengths in estimated words
    version: ClassVar[int] = 5
    reads: ClassVar[tuple[str, ...]] = ("task", "response", "context")
    needs: ClassVar[tuple[str, ...]] = ("dialogue context",)

    def __init__(self, max_tokens: int = 400, threshold: float | None = None) -> None:
        super().__init__(threshold)
        self.max_tokens = max_tokens

    def signature(self) -> str:
        return f"max_tokens={self.max_tokens}"

    def _analyze(self, samples: list[Sample]) -> list[dict[str, Any]]:
        rows = []
        # several responses to one context (candidates, attacks of one sample) read its words once
        context_words: dict[tuple[str, ...], tuple[list[str], list[str], float]] = {}
        for s in samples:
            if s.task != "dialogue" or not s.context:
                # counted by Detector.analyze once per sample (memo hits included)
                rows.append({"applicable": False, "suspicion": 0.0, "fallback": "not_applicable"})
                continue
            resp = tokens(s.response)[: self.max_tokens]
            if s.context not in context_words:
                last_tokens = tokens(s.context[-1])[: self.max_tokens]
                context_words[s.context] = (last_tokens, tokens(" ".join(s.context))[-4 * self.max_tokens:],
                                            word_length(last_tokens))
            last, whole, last_words = context_words[s.context]
            contain_last = {n: containment(resp, last, n) for n in (1, 2, 3)}
            contain_ctx = {n: containment(resp, whole, n) for n in (1, 2, 3)}
            # lengths and shares in words, so that a Chinese reply of three characters (about
            # 1.5 words) is judged on copying the last turn alone, as a two-word English one is,
            # and a run's share of a turn in two scripts weighs each token by its own script
            lcs, end = longest_common_run(resp, last)
            lcs_words = word_length(resp[end - lcs:end])
            resp_words = word_length(resp)
            lcs_resp = lcs_words / resp_words if resp else 0.0
            lcs_last = lcs_words / last_words if last else 0.0
            long_enough = resp_words >= MIN_CONTAINMENT_WORDS
            tri_last = contain_last[3] if long_enough else 0.0
            tri_ctx = contain_ctx[3] if long_enough else 0.0
            copy_of_turn = lcs_last if lcs_words >= 4 or lcs_last == 1.0 else 0.0
            # "lcs" counts tokens (characters in a script read by character); its shares are in words
            rows.append({"applicable": True, "contain_last": contain_last, "contain_context": contain_ctx,
                         "lcs": lcs, "lcs_share_response": lcs_resp, "lcs_share_last": lcs_last,
                         "suspicion": max(tri_last, copy_of_turn, 0.8 * tri_ctx)})
        return rows
