"""AdvEval's rule-based baselines (Chen et al. 2024, "Unveiling the Achilles' Heel of NLG
Evaluators", Tables 2-4), as robusteval reads their names; the paper's own implementations
are not public. Meaning-keeping rewrites are R+ (the victim should not drop), meaning-breaking
ones R- (the victim should drop).

| name | dir | rewrite |
|---|---|---|
| ``adveval-synonym`` | R+ | synonym adjective: one adjective -> a same-sense WordNet synonym, POS kept |
| ``adveval-extension`` | R+ | expansion: contractions written out ("don't" -> "do not") |
| ``adveval-contraction`` | R+ | contraction: "do not" -> "don't"; never expands |
| ``adveval-jumble`` | R- | shuffle the words |
| ``adveval-negate-previous`` | R- | the previous utterance with its main verb negated |
| ``adveval-question-to-assertion`` | R- | a question turned into a statement |
| ``adveval-change-question-word`` | R- | the wh-word replaced by another |
| ``adveval-change-name`` | R- | a person's name replaced by another |
"""

from __future__ import annotations

import json
import random
import re
from typing import Any, ClassVar

from robusteval.attacks.base import ENGLISH, Perturbation
from robusteval.attacks.dialogue_rules import JumbledWords
from robusteval.attacks.registry import register_attack
from robusteval.nlp import load_spacy, negate_first_clause
from robusteval.paths import resource
from robusteval.types import Sample

SOURCE = "Chen et al. 2024 (AdvEval), rule-based baselines, Tables 2-4"
DATA = json.loads(resource("attacks/baselines.json").read_text(encoding="utf-8"))


class _Baseline(Perturbation):
    family: ClassVar[str] = "adveval-baselines"
    source: ClassVar[str] = SOURCE


def _match_case(new: str, old: str) -> str:
    return new[0].upper() + new[1:] if old[:1].isupper() else new


def _adjective_synsets(wordnet: Any, lemma: str) -> list[Any]:
    return [ss for ss in wordnet.synsets(lemma) if ss.pos() in ("a", "s")]


@register_attack
class Synonym(_Baseline):
    """R+: AdvEval's "synonym adjective" invariant baseline (Chen et al. 2024, §4 Baselines,
    after Sai et al. 2021): one adjective is replaced by a WordNet synonym of the same sense.
    Sense check: the synonym comes from the adjective's most frequent sense, and that sense is
    also the synonym's own most frequent adjective sense. POS check: spaCy still tags the
    synonym as an adjective in the rewritten sentence. Not applicable without such an adjective."""

    name: ClassVar[str] = "adveval-synonym"
    languages: ClassVar[tuple[str, ...]] = ENGLISH
    direction: ClassVar[str] = "R+"
    keeps: ClassVar[tuple[str, ...]] = ("Overall_quality",)

    def perturb(self, sample: Sample, rng: random.Random) -> str | None:
        from robusteval.paths import ensure_nltk_data_path

        ensure_nltk_data_path()
        from nltk.corpus import wordnet

        nlp = load_spacy()
        doc = nlp(sample.response)
        adjectives = [t for t in doc if t.pos_ == "ADJ" and t.tag_ == "JJ" and t.is_alpha]
        rng.shuffle(adjectives)
        for t in adjectives:
            senses = _adjective_synsets(wordnet, t.lemma_.lower())
            if not senses:
                continue
            sense = senses[0]
            candidates = [n for n in sense.lemma_names() if n.isalpha() and n.lower() != t.text.lower()
                          and (_adjective_synsets(wordnet, n) or [None])[0] == sense]
            rng.shuffle(candidates)
            for word in candidates:
                text = sample.response[: t.idx] + _match_case(word, t.text) + sample.response[t.idx + len(t.text):]
                new = [u for u in nlp(text) if u.idx == t.idx]
                if new and new[0].pos_ == "ADJ":
                    return text
        return None


# contracted forms -> full forms, also in tokenized corpora ("i 'm", "don 't")
EXPAND = [(r"\b(w)o(?:n\s?'|\s?n')t\b", r"\1ill not"), (r"\b(c)a(?:n\s?'|\s?n')t\b", r"\1annot"),
          (r"\b(\w+)\s?n't\b", r"\1 not"), (r"\b(\w+)n\s't\b", r"\1 not"),
          (r"\b(\w+)\s?'m\b", r"\1 am"), (r"\b(\w+)\s?'re\b", r"\1 are"),
          (r"\b(\w+)\s?'ll\b", r"\1 will"), (r"\b(\w+)\s?'ve\b", r"\1 have"),
          (r"\b(it|that|he|she|there|here|what|where|who|how)\s?'s\b", r"\1 is"), (r"\b(let)\s?'s\b", r"\1 us")]


@register_attack
class Extension(_Baseline):
    """R+: AdvEval's expansion / phrase-extension invariant baseline (Chen et al. 2024, §4 lists
    "expansion", Table 2 "extension (EX)", §5 "phrase extension"): every contracted phrase is
    written out in full ("don't" -> "do not", "I'm" -> "I am", "won't" -> "will not"). Only
    unambiguous contractions are expanded ('s only after pronouns and "let"; 'd never). This is
    robusteval's reading of the name; the paper's implementation is not public. Not applicable
    to a text without a contraction."""

    name: ClassVar[str] = "adveval-extension"
    languages: ClassVar[tuple[str, ...]] = ENGLISH
    direction: ClassVar[str] = "R+"
    keeps: ClassVar[tuple[str, ...]] = ("Overall_quality",)

    def perturb(self, sample: Sample, rng: random.Random) -> str | None:
        text = sample.response
        for pattern, repl in EXPAND:
            text = re.sub(pattern, repl, text, flags=re.IGNORECASE)
        return text if text != sample.response else None


@register_attack
class Contraction(_Baseline):
    """R+: AdvEval's contraction invariant baseline (Chen et al. 2024, §4, Table 3 "CO"): every
    contractible phrase is contracted ("do not" -> "don't", "I am" -> "I'm"). It never expands
    (that is the extension baseline); a text with nothing to contract is not applicable."""

    name: ClassVar[str] = "adveval-contraction"
    languages: ClassVar[tuple[str, ...]] = ENGLISH
    direction: ClassVar[str] = "R+"
    keeps: ClassVar[tuple[str, ...]] = ("Overall_quality",)

    def perturb(self, sample: Sample, rng: random.Random) -> str | None:
        text = sample.response
        for long, short in DATA["contractions"]:
            text = re.sub(rf"\b{re.escape(long)}\b", lambda m, s=short: _match_case(s, m.group(0)), text,
                          flags=re.IGNORECASE)
        return text if text != sample.response else None


@register_attack
class Jumble(JumbledWords):
    """R-: shuffle the words of the response (AdvEval's jumble baseline)."""

    name: ClassVar[str] = "adveval-jumble"
    family: ClassVar[str] = "adveval-baselines"
    source: ClassVar[str] = SOURCE
    tasks: ClassVar[tuple[str, ...]] = ("dialogue", "summarization", "question_generation", "data_to_text", "fact")


@register_attack
class NegatePrevious(_Baseline):
    """R-: answer with the previous utterance, its main verb negated (a contradiction)."""

    name: ClassVar[str] = "adveval-negate-previous"
    languages: ClassVar[tuple[str, ...]] = ENGLISH
    direction: ClassVar[str] = "R-"
    targets: ClassVar[tuple[str, ...]] = ("Coherence", "Non-contradiction")
    tasks: ClassVar[tuple[str, ...]] = ("dialogue",)

    def language_text(self, sample: Sample) -> str:
        return sample.context[-1] if sample.context else sample.response  # it rewrites the last turn

    def perturb(self, sample: Sample, rng: random.Random) -> str | None:
        if not sample.context:
            return None
        return negate_first_clause(sample.context[-1])


@register_attack
class QuestionToAssertion(_Baseline):
    """R-: turn a question into a statement (yes/no questions get subject-aux order back)."""

    name: ClassVar[str] = "adveval-question-to-assertion"
    languages: ClassVar[tuple[str, ...]] = ENGLISH
    direction: ClassVar[str] = "R-"
    targets: ClassVar[tuple[str, ...]] = ("Overall_quality",)
    tasks: ClassVar[tuple[str, ...]] = ("question_generation", "dialogue")

    def perturb(self, sample: Sample, rng: random.Random) -> str | None:
        text = sample.response.strip()
        if "?" not in text:
            return None
        doc = load_spacy()(text)
        first = doc[0]
        subj = next((t for t in doc if t.dep_ in ("nsubj", "nsubjpass", "expl")), None)
        if first.pos_ == "AUX" and subj is not None and subj.i > 0:
            span = doc[subj.left_edge.i: subj.right_edge.i + 1]
            rest = doc[span.end:].text.rstrip(" ?")
            aux = first.text.lower()
            subject = _match_case(span.text, "A") if span[0].pos_ != "PROPN" else span.text
            if aux in ("do", "does", "did"):  # "Did he go?" -> "He went."
                from lemminflect import getInflection

                verb = next((t for t in doc[span.end:] if t.pos_ == "VERB"), None)
                if verb is not None:
                    tag = {"does": "VBZ", "did": "VBD"}.get(aux, "VBP")
                    inflected = (getInflection(verb.lemma_, tag=tag) or [verb.text])[0]
                    rest = doc[span.end:verb.i].text + (" " if verb.i > span.end else "") + inflected + \
                        (" " + doc[verb.i + 1:].text.rstrip(" ?") if verb.i + 1 < len(doc) else "")
                    return f"{subject} {rest.strip()}.".replace(" .", ".")
            return f"{subject} {aux} {rest}.".replace(" .", ".")
        return text.replace("?", ".")


@register_attack
class ChangeQuestionWord(_Baseline):
    """R-: replace the question word by another one (the answer no longer fits)."""

    name: ClassVar[str] = "adveval-change-question-word"
    languages: ClassVar[tuple[str, ...]] = ENGLISH
    direction: ClassVar[str] = "R-"
    targets: ClassVar[tuple[str, ...]] = ("Overall_quality",)
    tasks: ClassVar[tuple[str, ...]] = ("question_generation", "dialogue")

    def perturb(self, sample: Sample, rng: random.Random) -> str | None:
        words = DATA["question_words"]
        m = re.search(rf"\b({'|'.join(words)})\b", sample.response, flags=re.IGNORECASE)
        if not m:
            return None
        new = rng.choice([w for w in words if w != m.group(1).lower()])
        return sample.response[: m.start()] + _match_case(new, m.group(1)) + sample.response[m.end():]


@register_attack
class ChangeName(_Baseline):
    """R-: replace a person's name by another (from the context if it names someone else)."""

    name: ClassVar[str] = "adveval-change-name"
    languages: ClassVar[tuple[str, ...]] = ENGLISH
    direction: ClassVar[str] = "R-"
    targets: ClassVar[tuple[str, ...]] = ("Non-contradiction",)

    def perturb(self, sample: Sample, rng: random.Random) -> str | None:
        nlp = load_spacy()
        people = [e for e in nlp(sample.response).ents if e.label_ == "PERSON"]
        if not people:
            return None
        target = people[0]
        support = " ".join([*sample.context, sample.fact or ""])
        pool = sorted({e.text for e in nlp(support).ents if e.label_ == "PERSON"
                       and e.text.lower() not in target.text.lower() and target.text.lower() not in e.text.lower()})
        pool = pool or [n for n in DATA["names"] if n.lower() not in target.text.lower()]
        return sample.response[: target.start_char] + rng.choice(pool) + sample.response[target.end_char:]
