"""Rule attacks on dialogue responses from Vasselli & Watanabe, "Adversarial Evaluation of
Dialogue System Metrics" (Table 2), published as Vasselli, Nohejl & Watanabe, "Measuring the
Robustness of Reference-Free Dialogue Evaluation Systems" (COLING 2025): speaker-tag prefixes,
generic responses, ungrammatical rewrites and context copies. Where the paper's prose leaves a
detail open, the authors' released benchmark generator settles it: "repeat words" duplicates
``ceil(0.2 * n)`` distinct word positions, and "only nouns and verbs" also keeps pronouns.
All are ``R-``: a sound metric should score the result below the human response; the paper
counts an attack successful when the metric scores the adversarial response at least as high
as the original (robusteval's beats-reference criterion).

The paper's responses are English, where a word is what spaces separate. In a response written
mostly in a script without spaces (Chinese, Japanese, Thai...) the word-order rules (jumbled,
reversed, repeated words) move single characters instead (:mod:`robusteval.units`), keeping
punctuation in place; whitespace-split text there is one "word" per clause, so the rules would
otherwise repeat or move whole clauses. Text already segmented by spaces ("电影 很 好看"), English
and other spaced text are cut at spaces, exactly as the paper's generator cuts them.
"""

from __future__ import annotations

import json
import math
import random
import statistics
import unicodedata
from typing import Any, ClassVar

from robusteval.attacks.base import ENGLISH, Perturbation
from robusteval.attacks.registry import register_attack
from robusteval.langid import UNSPACED, main_script
from robusteval.paths import resource
from robusteval.types import Sample
from robusteval.units import Units, units_of

SOURCE = ("Vasselli & Watanabe, Adversarial Evaluation of Dialogue System Metrics, Table 2 "
          "(Vasselli, Nohejl & Watanabe, COLING 2025)")
RULES = json.loads(resource("attacks/dialogue_rules.json").read_text(encoding="utf-8"))
#: the longest median piece (in units) of text that spaces cut into words, not clauses
SEGMENTED_WORD = 3


def words(text: str) -> list[str]:
    return text.split()


def _unsegmented(text: str, cut: Units) -> bool:
    """Written mostly (by units: characters there, words elsewhere) in a script without spaces,
    and not already cut into words by spaces. Segmented text ("电影 很 好看 。") has at least
    three space-separated pieces of at most :data:`SEGMENTED_WORD` units as a rule (the median);
    spaces between clauses (Thai, a Chinese space used as a comma, a line break) leave longer
    pieces, which are cut into characters."""
    units = cut.units
    unspaced = [main_script(u) in UNSPACED for u in units]
    if not units or 2 * sum(unspaced) < len(units):
        return False
    pieces = [n for n in (len(units_of(p).units) for p in text.split()) if n]
    return len(pieces) < 3 or statistics.median(pieces) > SEGMENTED_WORD


class _Order:
    """The response's words in order and how to write a new sequence of them back: spaces in
    spaced text (the paper's cut), the original separators in unspaced text (see the module
    docstring)."""

    def __init__(self, text: str) -> None:
        cut = units_of(text)
        self.units: Units | None = cut if _unsegmented(text, cut) else None
        self.words = list(self.units.units) if self.units is not None else words(text)

    def write(self, order: list[str]) -> str:
        return self.units.join(order) if self.units is not None else " ".join(order)

    def write_doubled(self, chosen: set[int]) -> str:
        """The words with each position in ``chosen`` written twice, in place (a Latin word or a
        number inside unspaced text twice with a space between: "Python Python", not "PythonPython")."""
        if self.units is None:
            return " ".join(x for i, w in enumerate(self.words) for x in ([w, w] if i in chosen else [w]))
        seps = self.units.seps

        def doubled(w: str) -> str:
            return w + w if main_script(w) in UNSPACED else f"{w} {w}"

        return seps[0] + "".join((doubled(w) if i in chosen else w) + seps[i + 1] for i, w in enumerate(self.words))


class _DialogueRule(Perturbation):
    family: ClassVar[str] = "dialogue-rules"
    source: ClassVar[str] = SOURCE
    direction: ClassVar[str] = "R-"
    tasks: ClassVar[tuple[str, ...]] = ("dialogue",)


def _variant(base: type, name: str, doc: str, **attrs: Any) -> type:
    cls = type(name.replace("-", "_").title().replace("_", ""), (base,),
               {"name": name, "__doc__": doc, **attrs})
    return register_attack(cls)


class SpeakerTag(_DialogueRule):
    """Prefix the response with a speaker tag (teacher:/agent:/user:)."""

    tag: ClassVar[str] = ""
    targets: ClassVar[tuple[str, ...]] = ("naturalness", "fluency")

    def perturb(self, sample: Sample, rng: random.Random) -> str | None:
        return f"{self.tag} {sample.response.strip()}"


class Generic(_DialogueRule):
    """Replace the response by a fixed generic response."""

    text: ClassVar[str] = ""
    targets: ClassVar[tuple[str, ...]] = ("engagingness", "informativeness", "coherence")

    def perturb(self, sample: Sample, rng: random.Random) -> str | None:
        return self.text


for _key, _tag in RULES["speaker_tags"].items():
    _variant(SpeakerTag, f"speaker-tag-{_key}", f"Prefix the response with {_tag!r}.", tag=_tag)
for _key, _text in RULES["generic"].items():
    _variant(Generic, f"generic-{_key}", f"Replace the response by {_text!r}.", text=_text)


@register_attack
class NoPunctuation(_DialogueRule):
    """Remove every punctuation token (and punctuation glued to words)."""

    name: ClassVar[str] = "no-punctuation"
    targets: ClassVar[tuple[str, ...]] = ("fluency", "grammaticality", "understandability")

    def perturb(self, sample: Sample, rng: random.Random) -> str | None:
        out = []
        for w in words(sample.response):
            stripped = "".join(ch for ch in w if not unicodedata.category(ch).startswith("P"))
            if stripped:
                out.append(stripped)
        return " ".join(out) if out else None


@register_attack
class NoStopwords(_DialogueRule):
    """Remove stop words (spaCy's English list)."""

    name: ClassVar[str] = "no-stopwords"
    languages: ClassVar[tuple[str, ...]] = ENGLISH
    targets: ClassVar[tuple[str, ...]] = ("fluency", "grammaticality", "naturalness")

    def perturb(self, sample: Sample, rng: random.Random) -> str | None:
        from spacy.lang.en.stop_words import STOP_WORDS

        kept = [w for w in words(sample.response) if w.lower() not in STOP_WORDS]
        return " ".join(kept) if kept else None


class _POSFilter(_DialogueRule):
    languages: ClassVar[tuple[str, ...]] = ENGLISH
    keep_pos: ClassVar[frozenset[str]] = frozenset()
    targets: ClassVar[tuple[str, ...]] = ("fluency", "grammaticality", "naturalness")

    def perturb(self, sample: Sample, rng: random.Random) -> str | None:
        from robusteval.nlp import load_spacy

        doc = load_spacy()(sample.response)
        kept = [t.text for t in doc if t.pos_ in self.keep_pos]
        return " ".join(kept) if kept else None


@register_attack
class OnlyNounsVerbs(_POSFilter):
    """Keep only nouns, proper nouns, pronouns and verbs (spaCy POS), as the authors' generator
    does (Penn NN*, PRP, WP, VB*)."""

    name: ClassVar[str] = "only-nouns-verbs"
    keep_pos: ClassVar[frozenset[str]] = frozenset({"NOUN", "PROPN", "PRON", "VERB"})


@register_attack
class OnlyNouns(_POSFilter):
    """Keep only nouns and proper nouns (spaCy POS)."""

    name: ClassVar[str] = "only-nouns"
    keep_pos: ClassVar[frozenset[str]] = frozenset({"NOUN", "PROPN"})


@register_attack
class JumbledWords(_DialogueRule):
    """Shuffle the words of the response (seeded per sample)."""

    name: ClassVar[str] = "jumbled-words"
    targets: ClassVar[tuple[str, ...]] = ("fluency", "coherence", "grammaticality")

    def perturb(self, sample: Sample, rng: random.Random) -> str | None:
        cut = _Order(sample.response)
        w = cut.words
        if len(set(w)) < 2:
            return None
        for _ in range(10):
            shuffled = w[:]
            rng.shuffle(shuffled)
            if shuffled != w:
                return cut.write(shuffled)
        return cut.write(w[::-1])


@register_attack
class ReversedWords(_DialogueRule):
    """Reverse the order of the words."""

    name: ClassVar[str] = "reversed-words"
    targets: ClassVar[tuple[str, ...]] = ("fluency", "coherence", "grammaticality")

    def perturb(self, sample: Sample, rng: random.Random) -> str | None:
        cut = _Order(sample.response)
        return cut.write(cut.words[::-1])


@register_attack
class RepeatWords(_DialogueRule):
    """Duplicate ``ceil(p * n)`` distinct, randomly chosen words in place (p = 0.2 in the paper)."""

    name: ClassVar[str] = "repeat-words"
    targets: ClassVar[tuple[str, ...]] = ("fluency", "naturalness")

    def __init__(self, p: float = 0.2, seed: int = 0) -> None:
        super().__init__(seed=seed)
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"repeat-words: p must be in [0, 1], got {p}")
        self.p = p

    def perturb(self, sample: Sample, rng: random.Random) -> str | None:
        cut = _Order(sample.response)
        n = len(cut.words)
        chosen = set(rng.sample(range(n), math.ceil(n * self.p))) if n else set()
        return cut.write_doubled(chosen)


@register_attack
class PreviousUtterance(_DialogueRule):
    """Replace the response by the previous utterance (the last context turn)."""

    name: ClassVar[str] = "previous-utterance"
    targets: ClassVar[tuple[str, ...]] = ("coherence", "engagingness", "informativeness")

    def perturb(self, sample: Sample, rng: random.Random) -> str | None:
        return sample.context[-1] if sample.context else None


@register_attack
class PreviousUtterancePrefix(_DialogueRule):
    """Prefix the response with the previous utterance."""

    name: ClassVar[str] = "previous-utterance-prefix"
    targets: ClassVar[tuple[str, ...]] = ("coherence", "naturalness")

    def perturb(self, sample: Sample, rng: random.Random) -> str | None:
        return f"{sample.context[-1]} {sample.response}" if sample.context else None
