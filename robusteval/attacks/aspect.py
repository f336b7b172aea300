"""The 18 aspect-targeted perturbations of Hu et al. 2024, "Are LLM-based Evaluators
Confusing NLG Quality Criteria?" (ACL; §3.2, Table 2, App. B), each lowering one quality aspect:

| aspect | perturbations |
|---|---|
| Fluency | repetition, passive voice, inversion |
| Coherence | improper connective, **sentence exchange** |
| Grammaticality | incorrect verb form, **word exchange**, **spelling mistake** |
| Simplicity | uncommon phrase, complex sentence |
| Informativeness | abbreviation, hypernym, **sentence deletion** |
| Non-hallucination | complement, continuation |
| Non-contradiction | different entity, conflicting fact, negation |

As in App. B, the four in bold are rules (``aspect-<name>``) and the other 14 are LLM rewrites
(``aspect-<name>``, any backend of :mod:`robusteval.llm`) prompted with an instruction and
three demonstrations each, written for robusteval (``resources/attacks/aspects.json``; the
paper prompts GPT-4 with 10 hand-written demonstrations that we do not reproduce). Six of the
14 also have an offline rule variant, ``aspect-<name>-rule``, built to do what the paper's
Table 2 example does: a redundant synonym after words of every sentence (repetition), a wrong
connective on every later sentence, every verb in a wrong form, every noun generalized
(hypernym), every named entity / number / date replaced by one the text and its source never
mention (different entity), one clause negated. Which aspects each perturbation is expected to
lower, and where Table 19's annotators disagreed, is in :mod:`robusteval.aspects`.
"""

from __future__ import annotations

import json
import random
import unicodedata
from typing import Any, ClassVar

from robusteval.aspects import ASPECTS, TARGET, expected_affected, human_affected
from robusteval.attacks.base import ENGLISH, Perturbation
from robusteval.attacks.registry import register_attack
from robusteval.langid import UNSPACED, main_script
from robusteval.llm.backends import LazyBackend
from robusteval.nlp import join_sentences, load_spacy, negate_clause, shift_numeric, split_sentences
from robusteval.paths import resource
from robusteval.types import Sample

SOURCE = "Hu et al. 2024, Are LLM-based Evaluators Confusing NLG Quality Criteria? (ACL), Table 2, App. B"
SPEC = json.loads(resource("attacks/aspects.json").read_text(encoding="utf-8"))


class _Aspect(Perturbation):
    family: ClassVar[str] = "aspect"
    source: ClassVar[str] = SOURCE
    direction: ClassVar[str] = "R-"
    perturbation: ClassVar[str] = ""  # the Table 2 perturbation (robusteval.aspects.PERTURBATIONS)
    variant: ClassVar[str] = "rule"  # "rule" or "llm"

    @property
    def aspect(self) -> str:
        return TARGET[self.perturbation]

    def run(self, sample: Sample, victim: Any = None, budget: int | None = None) -> Any:
        result = super().run(sample, victim, budget)
        result.meta["aspect"] = self.aspect
        result.meta["perturbation"] = self.perturbation
        return result

    def describe(self) -> dict[str, Any]:
        d = super().describe()
        hit = expected_affected(self.perturbation)
        d.update(perturbation=self.perturbation, variant=self.variant, aspect=self.aspect, targets=hit,
                 keeps=[a for a in ASPECTS if a not in hit], human_affected=human_affected(self.perturbation))
        return d


def _sentences(sample: Sample) -> list[str]:
    return split_sentences(sample.response)


def _wordnet() -> Any:
    from robusteval.paths import ensure_nltk_data_path

    ensure_nltk_data_path()
    from nltk.corpus import wordnet

    return wordnet


def _inflect(word: str, tag: str) -> str:
    from lemminflect import getInflection

    forms = getInflection(word, tag=tag) if tag else None
    return forms[0] if forms else word


def _replace_tokens(text: str, edits: dict[int, tuple[int, str]]) -> str:
    """Apply ``{start_char: (length, new)}`` edits right to left."""
    for start in sorted(edits, reverse=True):
        length, new = edits[start]
        text = text[:start] + new + text[start + length:]
    return text


def is_word(token: str) -> bool:
    """Letters of any script with their combining marks (Devanagari and Arabic vowel signs are
    marks, so ``str.isalpha`` rejects "जाऊँगा"); no digits or punctuation."""
    return any(c.isalpha() for c in token) and all(c.isalpha() or unicodedata.category(c)[0] == "M" for c in token)


def _cased(new: str, like: str) -> str:
    return new[0].upper() + new[1:] if like[:1].isupper() and new else new


# -- the four rule-based perturbations of App. B ---------------------------------------------

@register_attack
class SentenceExchange(_Aspect):
    """Swap two adjacent sentences (Hu et al. 2024, Table 2, Coherence; rule-based per App. B)."""

    name: ClassVar[str] = "aspect-sentence-exchange"
    perturbation: ClassVar[str] = "sentence-exchange"

    def perturb(self, sample: Sample, rng: random.Random) -> str | None:
        sents = _sentences(sample)
        if len(sents) < 2:
            return None
        i = rng.randrange(len(sents) - 1)
        sents[i], sents[i + 1] = sents[i + 1], sents[i]
        return join_sentences(sents)


@register_attack
class WordExchange(_Aspect):
    """Swap two adjacent words in every sentence (Hu et al. 2024, Table 2, Grammaticality;
    rule-based per App. B). Table 2's example swaps one pair per sentence ("buy a and tablet",
    "brands other", "work after"); the rule itself is in the authors' code, which is not
    available, so this is robusteval's reading of the example."""

    name: ClassVar[str] = "aspect-word-exchange"
    perturbation: ClassVar[str] = "word-exchange"

    def perturb(self, sample: Sample, rng: random.Random) -> str | None:
        out, changed = [], False
        for sent in _sentences(sample):
            words = sent.split()
            pairs = [i for i in range(len(words) - 1)
                     if is_word(words[i]) and is_word(words[i + 1]) and words[i].lower() != words[i + 1].lower()]
            if pairs:
                i = rng.choice(pairs)
                words[i], words[i + 1] = words[i + 1], words[i]
                changed = True
            out.append(" ".join(words))
        return " ".join(out) if changed else None


SPELLING_PER_SENTENCE = 2  # Hu et al. Table 2's example: two misspelt words in each of its sentences


def graphemes(word: str) -> list[str]:
    """The user-perceived characters of ``word`` (Unicode extended grapheme clusters): a
    Devanagari consonant with its vowel sign is one, so a typo never strands a mark."""
    import regex

    return regex.findall(r"\X", word)


def misspell(word: str, rng: random.Random) -> str:
    """One typo of the kinds in Hu et al.'s Table 2 example: a doubled letter ("wantts",
    "wwill"), a dropped letter ("kno", "othe", "cheapr") or two swapped neighbours ("atfer").
    A one-letter word is doubled. Letters are grapheme clusters (:func:`graphemes`), so the
    typo is well-formed in any script."""
    g = graphemes(word)
    if len(g) < 2:
        return word * 2
    j = rng.randrange(len(g) - 1)
    kind = rng.choice(("double", "drop", "swap"))
    if kind == "swap" and g[j] != g[j + 1]:
        out = [*g[:j], g[j + 1], g[j], *g[j + 2:]]
    elif (kind == "drop" or kind == "swap") and len(g) > 3:
        out = g[:j + 1] + g[j + 2:]
    else:
        out = [*g[:j], g[j], g[j], *g[j + 1:]]
    return "".join(out)


@register_attack
class SpellingMistake(_Aspect):
    """Misspell words in every sentence (Hu et al. 2024, Table 2, Grammaticality; rule-based per
    App. B): up to ``per_sentence`` (2, as Table 2's example) words of three or more letters
    (letters of any script with their marks, at least two graphemes) per sentence get one typo
    each (:func:`misspell`). Unspaced scripts (Chinese, Japanese) have no such words: not
    applicable. The authors' rule is in code that is not available; the rate and the kinds of
    typo are read from the example."""

    name: ClassVar[str] = "aspect-spelling-mistake"
    perturbation: ClassVar[str] = "spelling-mistake"

    def __init__(self, per_sentence: int = SPELLING_PER_SENTENCE, seed: int = 0) -> None:
        super().__init__(seed=seed)
        if int(per_sentence) < 1:
            raise ValueError(f"per_sentence must be at least 1, got {per_sentence}")
        self.per_sentence = int(per_sentence)

    def perturb(self, sample: Sample, rng: random.Random) -> str | None:
        out, changed = [], False
        for sent in _sentences(sample):
            words = sent.split()
            # three letters (code points) and two graphemes: "the" in English, "खाना" in Hindi;
            # not a run of Chinese or Japanese, which is no word ("好的谢谢" -> "的好谢谢" is no typo)
            idx = [i for i, w in enumerate(words) if is_word(w) and len(w) >= 3 and len(graphemes(w)) >= 2
                   and main_script(w) not in UNSPACED]
            for i in rng.sample(idx, min(self.per_sentence, len(idx))):
                words[i] = misspell(words[i], rng)
                changed = True
            out.append(" ".join(words))
        return " ".join(out) if changed else None


@register_attack
class SentenceDeletion(_Aspect):
    """Delete one sentence (Hu et al. 2024, Table 2, Informativeness; rule-based per App. B)."""

    name: ClassVar[str] = "aspect-sentence-deletion"
    perturbation: ClassVar[str] = "sentence-deletion"

    def perturb(self, sample: Sample, rng: random.Random) -> str | None:
        sents = _sentences(sample)
        if len(sents) < 2:
            return None
        del sents[rng.randrange(len(sents))]
        return join_sentences(sents)


# -- offline rule variants of six LLM perturbations ---------------------------------------------

@register_attack
class RepetitionRule(_Aspect):
    """Offline variant of Repetition (Hu et al. 2024, Table 2, Fluency): in every sentence, one
    verb, adjective or adverb gets a redundant WordNet synonym after it ("call and telephone"),
    as the paper's example adds redundant paraphrases. Not applicable without any synonym."""

    name: ClassVar[str] = "aspect-repetition-rule"
    perturbation: ClassVar[str] = "repetition"
    languages: ClassVar[tuple[str, ...]] = ENGLISH
    POS: ClassVar[dict[str, str]] = {"VERB": "v", "ADJ": "a", "ADV": "r"}

    def perturb(self, sample: Sample, rng: random.Random) -> str | None:
        wn = _wordnet()
        edits: dict[int, tuple[int, str]] = {}
        for sent in load_spacy()(sample.response).sents:
            words = [t for t in sent if t.pos_ in self.POS and t.is_alpha and t.lemma_.isalpha()
                     and t.tag_ not in ("JJR", "JJS", "RBR", "RBS") and t.dep_ != "prep"]
            rng.shuffle(words)
            for t in words:
                synonyms = [n.replace("_", " ") for ss in wn.synsets(t.lemma_, pos=self.POS[t.pos_])[:1]
                            for n in ss.lemma_names()]
                synonyms = [w for w in dict.fromkeys(synonyms) if w.isalpha() and w.lower() != t.lemma_.lower()]
                if synonyms:
                    syn = _inflect(synonyms[0], t.tag_) if t.pos_ == "VERB" else synonyms[0]
                    edits[t.idx] = (len(t.text), f"{t.text} and {syn}")
                    break
        return _replace_tokens(sample.response, edits) if edits else None


@register_attack
class ImproperConnectiveRule(_Aspect):
    """Offline variant of Improper Connective (Hu et al. 2024, Table 2, Coherence): every
    sentence after the first opens with a connective of the wrong relation (or has its own
    connective replaced by one of another relation), as in the paper's example."""

    name: ClassVar[str] = "aspect-improper-connective-rule"
    perturbation: ClassVar[str] = "improper-connective"
    languages: ClassVar[tuple[str, ...]] = ENGLISH

    def perturb(self, sample: Sample, rng: random.Random) -> str | None:
        sents = _sentences(sample)
        if len(sents) < 2:
            return None
        groups = SPEC["connectives"]
        nlp = load_spacy()
        for i in range(1, len(sents)):
            current = next((g for g, words in groups.items() for w in words if sents[i].startswith(w)), None)
            if current:
                word = next(w for w in groups[current] if sents[i].startswith(w))
                rest = sents[i][len(word):].strip()
                other = rng.choice([w for g, ws in groups.items() if g != current for w in ws])
            else:
                rest = sents[i]
                doc = nlp(rest)
                if doc and doc[0].pos_ != "PROPN" and rest[:1].isupper() and rest[1:2].islower():
                    rest = rest[0].lower() + rest[1:]
                other = rng.choice(groups["contrast"] + groups["cause"])
            sents[i] = f"{other} {rest}"
        return " ".join(sents)


# a verb's tag -> inflections that make the sentence ungrammatical in its place
WRONG_FORMS = {"VBD": ("VBG", "VB"), "VBZ": ("VB", "VBG"), "VBP": ("VBZ", "VBG"), "VB": ("VBG", "VBZ", "VBD"),
               "VBG": ("VB", "VBZ"), "VBN": ("VBG", "VB")}


@register_attack
class IncorrectVerbFormRule(_Aspect):
    """Offline variant of Incorrect Verb Form (Hu et al. 2024, Table 2, Grammaticality): every
    verb (and every form of "be") takes a wrong inflection of its lemma (lemminflect), as in the
    paper's "Josh want to buying a tablet and doesn't knows..."."""

    name: ClassVar[str] = "aspect-incorrect-verb-form-rule"
    perturbation: ClassVar[str] = "incorrect-verb-form"
    languages: ClassVar[tuple[str, ...]] = ENGLISH

    def perturb(self, sample: Sample, rng: random.Random) -> str | None:
        from lemminflect import getAllInflections

        edits: dict[int, tuple[int, str]] = {}
        for v in load_spacy()(sample.response):
            if v.tag_ not in WRONG_FORMS or not v.is_alpha:
                continue
            if v.dep_ == "prep" or not (v.pos_ == "VERB" or (v.pos_ == "AUX" and v.lemma_ == "be")):
                continue
            inflections = getAllInflections(v.lemma_, upos=v.pos_)
            options = [f for tag in WRONG_FORMS[v.tag_] for f in inflections.get(tag, ())
                       if f.lower() != v.text.lower()]
            if options:
                edits[v.idx] = (len(v.text), _cased(rng.choice(options), v.text))
        return _replace_tokens(sample.response, edits) if edits else None


@register_attack
class HypernymRule(_Aspect):
    """Offline variant of Hypernym (Hu et al. 2024, Table 2, Informativeness): every common noun
    is replaced by its first WordNet hypernym (one choice per lemma, so repeats stay
    consistent), as the paper's example generalizes "tablet" to "device" throughout."""

    name: ClassVar[str] = "aspect-hypernym-rule"
    perturbation: ClassVar[str] = "hypernym"
    languages: ClassVar[tuple[str, ...]] = ENGLISH

    def perturb(self, sample: Sample, rng: random.Random) -> str | None:
        wn = _wordnet()
        chosen: dict[str, str | None] = {}
        edits: dict[int, tuple[int, str]] = {}
        for t in load_spacy()(sample.response):
            if t.pos_ != "NOUN" or not t.is_alpha:
                continue
            if t.lemma_ not in chosen:
                synsets = wn.synsets(t.lemma_, pos=wn.NOUN)
                # nltk returns a synset's pointers from a set, in hash order: sort for determinism
                hypers = sorted(synsets[0].hypernyms(), key=lambda h: h.name()) if synsets else []
                chosen[t.lemma_] = hypers[0].lemma_names()[0].replace("_", " ") if hypers else None
            word = chosen[t.lemma_]
            if word is None:
                continue
            if t.tag_ == "NNS":
                word = _inflect(word, "NNS")
            edits[t.idx] = (len(t.text), _cased(word, t.text))
        return _replace_tokens(sample.response, edits) if edits else None


@register_attack
class DifferentEntityRule(_Aspect):
    """Offline variant of Different Entity (Hu et al. 2024, Table 2, Non-contradiction): every
    named entity is replaced by another of its kind that neither the text nor its source
    mentions (robusteval's lists in ``resources/attacks/aspects.json``; one choice per surface
    form), and numbers, dates and times are shifted, so the text names things the source does
    not -- never "Josh will call Josh"."""

    name: ClassVar[str] = "aspect-different-entity-rule"
    perturbation: ClassVar[str] = "different-entity"
    languages: ClassVar[tuple[str, ...]] = ENGLISH

    def perturb(self, sample: Sample, rng: random.Random) -> str | None:
        lists: dict[str, list[str]] = SPEC["entities"]
        seen = " ".join([sample.response, *sample.context, sample.fact or "", sample.reference or ""]).lower()
        chosen: dict[str, str | None] = {}
        edits: dict[int, tuple[int, str]] = {}
        for e in load_spacy()(sample.response).ents:
            if e.text not in chosen:
                if e.label_ in lists:
                    pool = [x for x in lists[e.label_] if x.lower() not in seen and x not in chosen.values()]
                    chosen[e.text] = rng.choice(pool) if pool else None
                else:
                    chosen[e.text] = shift_numeric(e.text, rng)
            new = chosen[e.text]
            if new and new != e.text:
                if e.text.lower().startswith("the ") and new.lower().startswith("the "):
                    new = e.text[:4] + new[4:]
                elif new.startswith("the ") and sample.response[:e.start_char].rstrip().lower().endswith("the"):
                    new = new[4:]  # "the Louvre" after "the": keep one article
                edits[e.start_char] = (len(e.text), new)
        return _replace_tokens(sample.response, edits) if edits else None


@register_attack
class NegationRule(_Aspect):
    """Offline variant of Negation (Hu et al. 2024, Table 2, Non-contradiction): negate the
    main verb of one clause picked with the seed (or remove its negation), as in the paper's
    "Josh will not call Brian"."""

    name: ClassVar[str] = "aspect-negation-rule"
    perturbation: ClassVar[str] = "negation"
    languages: ClassVar[tuple[str, ...]] = ENGLISH

    def perturb(self, sample: Sample, rng: random.Random) -> str | None:
        text = sample.response
        sents = list(load_spacy()(text).sents)
        rng.shuffle(sents)
        for sent in sents:
            out = negate_clause(text, sent.root)
            if out is not None:
                return out
        return None


# -- the 14 LLM perturbations of App. B ---------------------------------------------------------

class LLMPerturbation(_Aspect):
    """Rewrite the response with the LLM backend: the perturbation's instruction, then its
    demonstrations (``resources/attacks/aspects.json``), then the source and the text."""

    needs_llm: ClassVar[bool] = True
    variant: ClassVar[str] = "llm"

    def __init__(self, generator: Any = None, max_new_tokens: int = 200, seed: int = 0) -> None:
        super().__init__(seed=seed)
        self._spec = generator
        self.max_new_tokens = max_new_tokens

    generator = LazyBackend("_spec")

    def prompt(self, sample: Sample) -> str:
        spec = SPEC["llm"][self.perturbation]
        shots = "\n\n".join(f"Example {i}\nText: {before}\nRewritten: {after}"
                             for i, (before, after) in enumerate(spec["examples"], 1))
        src = sample.source_text()[:2000]
        return (f"{spec['instruction']}\n\n{shots}\n\n"
                + (f"Source:\n{src}\n\n" if src else "") + f"Text: {sample.response}\nRewritten:")

    def perturb(self, sample: Sample, rng: random.Random) -> str | None:
        from robusteval.llm import call_with
        from robusteval.llm.clean import clean_candidate

        outs = call_with(self.generator.generate, [self.prompt(sample)], optional={"ids": [sample.id]}, n=1,
                         temperature=0.0, max_new_tokens=self.max_new_tokens, seed=self.seed)[0]
        if not outs:  # the backend fell back (a failed request it was told to tolerate)
            return None
        text = clean_candidate(outs[0])
        return text or None


for _key, _spec in SPEC["llm"].items():
    _cls = type(f"LLM_{_key.replace('-', '_')}", (LLMPerturbation,), {
        "name": f"aspect-{_key}", "perturbation": _key,
        "__doc__": f"{_spec['instruction']} (LLM rewrite with {len(_spec['examples'])} demonstrations; "
                   f"Hu et al. 2024, Table 2, {TARGET[_key]}).",
    })
    register_attack(_cls)
