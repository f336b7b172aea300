"""The 18 aspect-targeted perturbations of Hu et al. 2024, "Are LLM-based Evaluators
Confusing NLG Quality Criteria?" (ACL; Table 2), each lowering one quality aspect:

| aspect | perturbations |
|---|---|
| Fluency | repetition (rule), passive voice, inversion (LLM) |
| Coherence | improper connective, sentence exchange (rule) |
| Grammaticality | incorrect verb form, word exchange, spelling mistake (rule) |
| Simplicity | uncommon phrase, complex sentence (LLM) |
| Informativeness | hypernym, sentence deletion (rule), abbreviation (LLM) |
| Non-hallucination | complement, continuation (LLM) |
| Non-contradiction | different entity, negation (rule), conflicting fact (LLM) |

Rule-based ones use spaCy, lemminflect and WordNet; the others ask the LLM backend with an
instruction and one example written for robusteval from the paper's descriptions
(``resources/attacks/aspects.json``). The aspect hierarchy used by the directional /
invariance expectations is in :func:`ancestors` / :func:`related`.
"""

from __future__ import annotations

import json
import random
from typing import Any, ClassVar

from robusteval.attacks.base import Perturbation
from robusteval.attacks.closed_ended import swap_mention
from robusteval.attacks.registry import register_attack
from robusteval.nlp import load_spacy, split_sentences
from robusteval.paths import resource
from robusteval.types import Sample

SOURCE = "Hu et al. 2024, Are LLM-based Evaluators Confusing NLG Quality Criteria? (ACL), Table 2"
SPEC = json.loads(resource("attacks/aspects.json").read_text(encoding="utf-8"))
PARENTS: dict[str, str | None] = SPEC["parents"]
ASPECTS = tuple(PARENTS)


def ancestors(aspect: str) -> list[str]:
    """``aspect`` and every aspect above it, up to Overall_quality."""
    out = []
    node: str | None = aspect
    while node is not None:
        out.append(node)
        node = PARENTS[node]
    return out


def related(a: str, b: str) -> bool:
    """True when one aspect is the other's ancestor (or the same)."""
    return a in ancestors(b) or b in ancestors(a)


class _Aspect(Perturbation):
    family: ClassVar[str] = "aspect"
    source: ClassVar[str] = SOURCE
    direction: ClassVar[str] = "R-"
    aspect: ClassVar[str] = "Overall_quality"

    def run(self, sample: Sample, victim: Any = None, budget: int | None = None) -> Any:
        result = super().run(sample, victim, budget)
        result.meta["aspect"] = self.aspect
        return result

    def describe(self) -> dict[str, Any]:
        d = super().describe()
        d["targets"] = ancestors(self.aspect)
        d["keeps"] = [a for a in ASPECTS if not related(a, self.aspect)]
        return d


def _sentences(sample: Sample) -> list[str]:
    return split_sentences(sample.response)


@register_attack
class Repetition(_Aspect):
    """Repeat one sentence (or, in a one-sentence text, a 3-5 word span) right after itself."""

    name: ClassVar[str] = "aspect-repetition"
    aspect: ClassVar[str] = "Fluency"

    def perturb(self, sample: Sample, rng: random.Random) -> str | None:
        sents = _sentences(sample)
        if len(sents) >= 2:
            i = rng.randrange(len(sents))
            return " ".join([*sents[: i + 1], sents[i], *sents[i + 1:]])
        words = sample.response.split()
        if len(words) < 4:
            return None
        n = rng.randint(3, min(5, len(words)))
        start = rng.randrange(len(words) - n + 1)
        return " ".join([*words[: start + n], *words[start: start + n], *words[start + n:]])


@register_attack
class ImproperConnective(_Aspect):
    """Open a later sentence with a connective of the wrong relation (e.g. 'However,')."""

    name: ClassVar[str] = "aspect-improper-connective"
    aspect: ClassVar[str] = "Coherence"

    def perturb(self, sample: Sample, rng: random.Random) -> str | None:
        sents = _sentences(sample)
        if len(sents) < 2:
            return None
        i = rng.randrange(1, len(sents))
        groups = SPEC["connectives"]
        current = next((g for g, words in groups.items() for w in words if sents[i].startswith(w)), None)
        if current:
            word = next(w for w in groups[current] if sents[i].startswith(w))
            rest = sents[i][len(word):].strip()
            other = rng.choice([w for g, ws in groups.items() if g != current for w in ws])
        else:
            rest = sents[i]
            doc = load_spacy()(rest)
            if doc and doc[0].pos_ != "PROPN" and rest[:1].isupper() and rest[1:2].islower():
                rest = rest[0].lower() + rest[1:]
            other = rng.choice(groups["contrast"] + groups["cause"])
        sents[i] = f"{other} {rest}"
        return " ".join(sents)


@register_attack
class SentenceExchange(_Aspect):
    """Swap two adjacent sentences."""

    name: ClassVar[str] = "aspect-sentence-exchange"
    aspect: ClassVar[str] = "Coherence"

    def perturb(self, sample: Sample, rng: random.Random) -> str | None:
        sents = _sentences(sample)
        if len(sents) < 2:
            return None
        i = rng.randrange(len(sents) - 1)
        sents[i], sents[i + 1] = sents[i + 1], sents[i]
        return " ".join(sents)


# a verb's tag -> inflections that make the sentence ungrammatical in its place
WRONG_FORMS = {"VBD": ("VBG", "VB"), "VBZ": ("VBG", "VB"), "VBP": ("VBG", "VBZ"), "VB": ("VBG", "VBD"),
               "VBG": ("VB", "VBZ"), "VBN": ("VBG", "VB")}


def _replace_token(text: str, token: Any, new: str) -> str:
    return text[: token.idx] + new + text[token.idx + len(token.text):]


@register_attack
class IncorrectVerbForm(_Aspect):
    """Replace a verb by a wrong inflection of the same lemma (lemminflect)."""

    name: ClassVar[str] = "aspect-incorrect-verb-form"
    aspect: ClassVar[str] = "Grammaticality"

    def perturb(self, sample: Sample, rng: random.Random) -> str | None:
        from lemminflect import getAllInflections

        doc = load_spacy()(sample.response)
        verbs = [t for t in doc if t.tag_ in WRONG_FORMS and t.is_alpha]
        rng.shuffle(verbs)
        for v in verbs:
            inflections = getAllInflections(v.lemma_, upos="VERB")
            for tag in WRONG_FORMS[v.tag_]:  # forms that break agreement/tense, not a tense change
                forms = [f for f in inflections.get(tag, ()) if f.lower() != v.text.lower()]
                if forms:
                    new = forms[0]
                    return _replace_token(sample.response, v, new[0].upper() + new[1:] if v.text[0].isupper() else new)
        return None


@register_attack
class WordExchange(_Aspect):
    """Swap two adjacent words."""

    name: ClassVar[str] = "aspect-word-exchange"
    aspect: ClassVar[str] = "Grammaticality"

    def perturb(self, sample: Sample, rng: random.Random) -> str | None:
        words = sample.response.split()
        pairs = [i for i in range(len(words) - 1)
                 if words[i].isalpha() and words[i + 1].isalpha() and words[i].lower() != words[i + 1].lower()]
        if not pairs:
            return None
        i = rng.choice(pairs)
        words[i], words[i + 1] = words[i + 1], words[i]
        return " ".join(words)


@register_attack
class SpellingMistake(_Aspect):
    """Misspell one word: swap two inner letters, or drop one when they are equal."""

    name: ClassVar[str] = "aspect-spelling-mistake"
    aspect: ClassVar[str] = "Grammaticality"

    def perturb(self, sample: Sample, rng: random.Random) -> str | None:
        words = sample.response.split()
        idx = [i for i, w in enumerate(words) if w.isalpha() and len(w) >= 4]
        if not idx:
            return None
        i = rng.choice(idx)
        w = words[i]
        j = rng.randrange(1, len(w) - 2)
        words[i] = w[:j] + w[j + 1] + w[j] + w[j + 2:] if w[j] != w[j + 1] else w[:j] + w[j + 1:]
        return " ".join(words)


@register_attack
class Hypernym(_Aspect):
    """Replace a noun by a more general word (its first WordNet hypernym)."""

    name: ClassVar[str] = "aspect-hypernym"
    aspect: ClassVar[str] = "Informativeness"

    def perturb(self, sample: Sample, rng: random.Random) -> str | None:
        from robusteval.paths import ensure_nltk_data_path

        ensure_nltk_data_path()
        from nltk.corpus import wordnet

        nouns = [t for t in load_spacy()(sample.response) if t.pos_ == "NOUN" and t.is_alpha]
        rng.shuffle(nouns)
        for t in nouns:
            synsets = wordnet.synsets(t.lemma_, pos=wordnet.NOUN)
            hypers = synsets[0].hypernyms() if synsets else []
            if hypers:
                word = hypers[0].lemma_names()[0].replace("_", " ")
                if t.tag_ == "NNS" and not word.endswith("s"):
                    from lemminflect import getInflection

                    word = (getInflection(word, tag="NNS") or [word])[0]
                return _replace_token(sample.response, t, word)
        return None


@register_attack
class SentenceDeletion(_Aspect):
    """Delete one sentence."""

    name: ClassVar[str] = "aspect-sentence-deletion"
    aspect: ClassVar[str] = "Informativeness"

    def perturb(self, sample: Sample, rng: random.Random) -> str | None:
        sents = _sentences(sample)
        if len(sents) < 2:
            return None
        del sents[rng.randrange(len(sents))]
        return " ".join(sents)


@register_attack
class DifferentEntity(_Aspect):
    """Replace a named entity by another of the same type from the source, or shift a number."""

    name: ClassVar[str] = "aspect-different-entity"
    aspect: ClassVar[str] = "Non-contradiction"

    def perturb(self, sample: Sample, rng: random.Random) -> str | None:
        return swap_mention(sample, None, rng, first=False, shift=True)


@register_attack
class Negation(_Aspect):
    """Negate the main verb of the first clause that has one (or remove its negation)."""

    name: ClassVar[str] = "aspect-negation"
    aspect: ClassVar[str] = "Non-contradiction"

    def perturb(self, sample: Sample, rng: random.Random) -> str | None:
        doc = load_spacy()(sample.response)
        text = sample.response
        for sent in doc.sents:
            root = sent.root
            if root.pos_ not in ("VERB", "AUX"):
                continue
            neg = [c for c in root.children if c.dep_ == "neg"]
            if neg:  # remove the existing negation ("is not" -> "is", "isn't" -> "is")
                t = neg[0]
                end = t.idx + len(t.text)
                start = t.idx if t.text.lower() == "n't" or t.idx == 0 else t.idx - 1
                return text[:start] + text[end:]
            aux = [c for c in root.children if c.dep_ in ("aux", "auxpass") and c.i < root.i]
            if aux:
                a = aux[0]
                return text[: a.idx + len(a.text)] + " not" + text[a.idx + len(a.text):]
            if root.lemma_ == "be":
                return text[: root.idx + len(root.text)] + " not" + text[root.idx + len(root.text):]
            do = {"VBZ": "does", "VBD": "did"}.get(root.tag_, "do")
            if root.tag_ not in ("VBZ", "VBD", "VBP", "VB"):
                continue
            return _replace_token(text, root, f"{do} not {root.lemma_}")
        return None


class LLMPerturbation(_Aspect):
    """Rewrite the response with the LLM backend following the perturbation's instruction."""

    needs_llm: ClassVar[bool] = True
    key: ClassVar[str] = ""

    def __init__(self, generator: Any = None, max_new_tokens: int = 160, seed: int = 0) -> None:
        super().__init__(seed=seed)
        self._spec = generator
        self._generator: Any = None
        self.max_new_tokens = max_new_tokens

    @property
    def generator(self) -> Any:
        if self._generator is None:
            from robusteval.llm import resolve_backend

            self._generator = resolve_backend(self._spec)
        return self._generator

    def prompt(self, sample: Sample) -> str:
        spec = SPEC["llm"][self.key]
        src = sample.source_text()[:2000]
        before, after = spec["example"]
        return (f"{spec['instruction']}\n\nExample\nText: {before}\nRewritten: {after}\n\n"
                + (f"Source:\n{src}\n\n" if src else "") + f"Text: {sample.response}\nRewritten:")

    def perturb(self, sample: Sample, rng: random.Random) -> str | None:
        from robusteval.attacks.adveval import clean_candidate
        from robusteval.llm import call_with

        outs = call_with(self.generator.generate, [self.prompt(sample)], optional={"ids": [sample.id]}, n=1,
                         temperature=0.0, max_new_tokens=self.max_new_tokens, seed=self.seed)[0]
        if not outs:  # the backend fell back (a failed request it was told to tolerate)
            return None
        out = outs[0]
        text = clean_candidate(out)
        return text or None


for _key, _spec in SPEC["llm"].items():
    _cls = type(f"LLM_{_key.replace('-', '_')}", (LLMPerturbation,), {
        "name": f"aspect-{_key}", "key": _key, "aspect": _spec["aspect"],
        "__doc__": f"{_spec['instruction']} (LLM rewrite; targets {_spec['aspect']}).",
    })
    register_attack(_cls)
