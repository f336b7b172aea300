"""[source_support] Facts in the response that the source does not support or contradicts.

The meaning-level attacks robusteval runs leave the text fluent and well formed, so the
surface detectors cannot see them: the closed-ended fact swaps of Liu et al. (KdConv-ADV /
DSTC7-ADV: the key entity, number or date replaced by another one), and Hu et al. 2024's
Non-contradiction perturbations (Table 2: Different Entity, Conflicting Fact, Negation) and
Faithfulness ones. What they change is checkable against the *source* -- the document, the
dialogue context, the knowledge fact and the references:

* **unsupported mentions** -- named entities, numbers and dates (spaCy NER) of the response
  that occur nowhere in the source. An entity is supported when every word of it occurs in
  the source (``"Obama"`` by ``"Barack Obama"``); a number when the same value does (``1,000``
  and ``1000``; number words ``"three"`` and ``3``);
* **substitutions** -- each response sentence is aligned to the source sentence sharing the
  most content lemmas (at least ``align_min`` of the response sentence's); a mention that sits
  in the same parse slot (the same head word and dependency: the subject of "beat") as a
  mention of the same kind in the aligned sentence, but names something else, is a swapped
  fact -- even when the swapped-in value occurs elsewhere in the source (a fact swap that
  reuses another of the document's names: "Chelsea beat Chelsea");
* **negation flips** -- a verb (or adjective) lemma negated in the response sentence and
  not in its aligned sentence, or the reverse ("will call" -> "will not call").

Suspicion = ``1 - exp(-(unsupported + 1.5 * (substitutions + flips)) / scale)``: one
unsupported name or number is 0.63 at scale 1 (default threshold 0.6), one substitution or
flip 0.78. A dialogue reply may
bring new names into a conversation, so this detector is meant for grounded tasks
(summarization, data-to-text, knowledge-grounded replies with a fact); its threshold is
calibrated per task with ``robusteval guard calibrate`` like every other.

spaCy's English pipeline does the NER and the parse, so the detector judges English only by
default (``languages=``); other languages abstain (suspicion 0, ``abstained_language:<code>``
counted in the report), as does a sample without any source text (``no_source``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any, ClassVar

from robusteval.detectors import parsing
from robusteval.detectors.base import Detector, register_detector

from robusteval.types import Sample

KINDS = {
    "entity": frozenset({"PERSON", "ORG", "NORP", "PRODUCT", "WORK_OF_ART", "EVENT", "LAW", "LANGUAGE",
                         "GPE", "LOC", "FAC"}),
    "number": frozenset({"CARDINAL", "QUANTITY", "MONEY", "PERCENT", "ORDINAL"}),
    "date": frozenset({"DATE", "TIME"}),
}
NUMBER_WORDS = {w: i for i, w in enumerate((
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
    "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen", "twenty"))}
NEGATIONS = frozenset({"not", "n't", "never", "no", "nobody", "nothing", "none", "neither", "nor", "nowhere"})


def kind_of(label: str) -> str | None:
    return next((k for k, labels in KINDS.items() if label in labels), None)


def numbers_in(text: str) -> set[str]:
    """Normalized numeric values in ``text``: digits without separators, number words as digits."""
    out = {m.group(0).replace(",", "").rstrip(".") for m in re.finditer(r"\d[\d,]*(?:\.\d+)?", text)}
    out |= {str(NUMBER_WORDS[w]) for w in re.findall(r"[a-z]+", text.lower()) if w in NUMBER_WORDS}
    return out


def words_in(text: str) -> set[str]:
    return {w.lower() for w in re.findall(r"\w+", text)}


def supported(mention: str, kind: str, words: set[str], numbers: set[str]) -> bool:
    if kind == "number" or (kind == "date" and numbers_in(mention)):
        values = numbers_in(mention)
        if values:
            return values <= numbers
    tokens = words_in(mention) - {"the", "a", "an", "of", "'s"}
    return bool(tokens) and tokens <= words


def content(sent: Any) -> set[str]:
    return {t.lemma_.lower() for t in sent if t.is_alpha and not t.is_stop}


def negated(sent: Any) -> dict[str, bool]:
    """Verb / adjective lemma -> whether it is negated in ``sent``."""
    out: dict[str, bool] = {}
    for t in sent:
        if t.pos_ in ("VERB", "AUX", "ADJ"):
            neg = any(c.dep_ == "neg" or c.lower_ in NEGATIONS for c in t.children)
            out[t.lemma_.lower()] = out.get(t.lemma_.lower(), False) or neg
    return out


def slot(root: Any) -> tuple[str, ...]:
    """Where a mention sits: its head's lemma and its dependency; through a preposition, the
    word the preposition attaches to as well ("beat ... on Sunday" -> ("beat", "on", "pobj"))."""
    head = root.head
    if head.pos_ == "ADP" and head.head is not head:
        return (head.head.lemma_.lower(), head.lemma_.lower(), root.dep_)
    return (head.lemma_.lower(), root.dep_)


def mentions(sent: Any) -> list[tuple[str, str, tuple[str, ...]]]:
    """(text, kind, slot) of the entity mentions: spaCy's named entities, plus runs of proper
    nouns the small English NER misses ("Arsenal beat ..."). The slot is where the mention sits
    in the parse: its root's head lemma and dependency ("Arsenal beat ..." -> ("beat", "nsubj"))."""
    out = [(e.text, k, slot(e.root)) for e in sent.ents if (k := kind_of(e.label_)) is not None]
    covered = {t.i for e in sent.ents for t in e}
    run: list[Any] = []
    for t in [*sent, None]:
        if t is not None and t.pos_ == "PROPN" and t.i not in covered:
            run.append(t)
            continue
        if run:
            root = next((r for r in run if r.head not in run), run[-1])
            out.append((" ".join(r.text for r in run), "entity", slot(root)))
            run = []
    return out


@register_detector
class SourceSupport(Detector):
    """Entities, numbers, dates and negations unsupported by the source (Liu et al.'s closed-ended
    swaps; Hu et al. 2024, Table 2, Non-contradiction and Faithfulness)."""

    name: ClassVar[str] = "source_support"
    family: ClassVar[str] = "meaning"
    source: ClassVar[str] = ("Liu et al., closed-ended adversarial references (KdConv-ADV / DSTC7-ADV); "
                             "Hu et al. 2024, Table 2 (Non-contradiction: Different Entity, Conflicting Fact, "
                             "Negation)")
    default_threshold: ClassVar[float] = 0.6
    reads: ClassVar[tuple[str, ...]] = ("response", "context", "reference", "references", "fact")

    def __init__(self, scale: float = 1.0, align_min: float = 0.5,
                 languages: tuple[str, ...] | list[str] | None = ("en",), threshold: float | None = None) -> None:
        super().__init__(threshold)
        if scale <= 0 or not 0 < align_min <= 1:
            raise ValueError("source_support: scale must be > 0 and align_min in (0, 1]")
        self.scale = scale
        self.align_min = align_min
        self.languages = tuple(languages) if languages else None

    def signature(self) -> str:
        langs = ",".join(self.languages) if self.languages else "any"
        return f"scale={self.scale},align_min={self.align_min},languages={langs}"

    @staticmethod
    def source_of(s: Sample) -> str:
        return "\n".join(t for t in (*s.context, s.fact or "", *s.all_references()) if t and t.strip())

    def _abstain(self, s: Sample) -> dict[str, Any] | None:
        """The row of a sample this detector does not judge (a language it does not cover, no
        source), None for the others."""
        from robusteval.langid import sample_language

        lang = sample_language(s) if self.languages else None
        if self.languages and lang not in self.languages:
            return {"suspicion": 0.0, "abstained": True, "language": lang, "fallback": f"abstained_language:{lang}"}
        if not self.source_of(s).strip():
            return {"suspicion": 0.0, "abstained": True, "fallback": "no_source"}
        return None

    def parse_requests(self, samples: Sequence[Sample]) -> list[tuple[str, bool]]:
        judged = [s for s in samples if self._abstain(s) is None]
        return [(t, True) for t in [s.response for s in judged] + [self.source_of(s) for s in judged]]

    def _analyze(self, samples: list[Sample]) -> list[dict[str, Any]]:
        rows: list[dict[str, Any] | None] = [self._abstain(s) for s in samples]
        todo = [i for i, r in enumerate(rows) if r is None]
        if todo:
            sources = [self.source_of(samples[i]) for i in todo]
            docs = parsing.parse([samples[i].response for i in todo] + sources, ner=True)
            for k, i in enumerate(todo):
                rows[i] = self._compare(docs[k], docs[len(todo) + k], sources[k])
        return [r for r in rows if r is not None]

    def _compare(self, resp: Any, src: Any, src_text: str) -> dict[str, Any]:
        words, numbers = words_in(src_text), numbers_in(src_text)
        unsupported = [m for m, k, _ in mentions(resp) if not supported(m, k, words, numbers)]
        said = " ".join(unsupported)
        # numbers NER did not tag ("5-1", "in 12 games") are values all the same
        unsupported += sorted(v for v in numbers_in(resp.text) - numbers if v not in numbers_in(said))
        src_sents = [(sent, content(sent)) for sent in src.sents]
        substitutions: list[str] = []
        flips: list[str] = []
        for sent in resp.sents:
            mine = content(sent)
            if not mine or not src_sents:
                continue
            best, lemmas = max(src_sents, key=lambda p: len(mine & p[1]))
            if len(mine & lemmas) / len(mine) < self.align_min:
                continue
            slots = {}
            for t, kind, slot in mentions(best):
                slots.setdefault((kind, slot), []).append(t)
            for m, kind, slot in mentions(sent):
                theirs = slots.get((kind, slot), [])
                mw = words_in(m)
                if theirs and not any(words_in(t) <= mw or mw <= words_in(t) for t in theirs) and m not in unsupported:
                    substitutions.append(m)
            ours_neg, their_neg = negated(sent), negated(best)
            flips += [lemma for lemma, neg in ours_neg.items() if lemma in their_neg and their_neg[lemma] != neg]
        score = len(unsupported) + 1.5 * (len(substitutions) + len(flips))
        return {"unsupported": unsupported, "substitutions": substitutions, "negation_flips": flips,
                "abstained": False, "suspicion": 1.0 - math.exp(-score / self.scale)}
