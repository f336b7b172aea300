"""Random perturbations of a response for randomized smoothing (:mod:`robusteval.defenses.smoothing`).

A response is cut into *units* (:mod:`robusteval.units`) -- words, and single characters in scripts written without
spaces (Han, Kana, Thai, Lao, Khmer, Myanmar, Tibetan) -- and the separators between them are kept, so a
perturbed text keeps its layout in every script. Each perturbation draws every unit
independently, which is what makes a certificate possible: a unit's distribution depends only
on the unit, so two texts that differ in k units have perturbation distributions whose total
variation is bounded by the k per-unit distances (:func:`robusteval.defenses.certificate.delta`).

* ``synonym`` (SAFER, Ye et al. 2020, ACL, §3: each word replaced by a uniformly random member
  of its fixed substitution set): with probability ``rate`` an English content word becomes a
  random member of its set (:func:`substitution_set`: WordNet lemmas sharing a synset, so a
  part of speech -- TextFooler's candidate source -- in symmetric ``classes`` by default, or
  all of a word's ``wordnet`` lemmas), at most ``max_set`` of them; stop words, non-English
  words and words without synonyms keep their set {word}. Certifies substitutions *within the
  sets*.
* ``mask`` (RanMASK, Zeng et al. 2021/2023, §3: random masking of a fixed share of tokens):
  each unit is deleted (or replaced by ``token``) with probability ``rate``, in any script.
  Certifies *any* k-unit substitution: a unit that is masked looks the same whatever the
  attacker wrote there.

A certificate covers texts that cut into the same units with the same separators, k of the
units changed (:func:`robusteval.units.changed_units`): replacing a word by two ("well-known" is two units),
merging words or changing punctuation is outside it. The synonym sets are English: other
Latin-script words that happen to be English words ("chat", "pain") get English sets, so for
text in other languages use ``mask``.
* ``char``: each letter of a word is, with probability ``rate``, deleted, doubled or swapped
  with its neighbour. Noise only: no certificate.
"""

from __future__ import annotations

import functools
import random
from typing import Any, ClassVar

from robusteval.registry import Registry
from robusteval.units import units_of


def _match_case(word: str, model: str) -> str:
    if model.isupper() and len(model) > 1:
        return word.upper()
    if model[:1].isupper():
        return word[:1].upper() + word[1:]
    return word


SETS = ("classes", "wordnet")


@functools.lru_cache(maxsize=1)
def _wordnet() -> Any:
    from robusteval.paths import ensure_nltk_data_path, no_nltk_downloads

    ensure_nltk_data_path()
    from nltk.corpus import wordnet as wn

    with no_nltk_downloads():
        wn.ensure_loaded()
    return wn


def _candidate(word: str) -> bool:
    from spacy.lang.en.stop_words import STOP_WORDS

    return len(word) >= 2 and word.isascii() and word.isalpha() and word not in STOP_WORDS


@functools.lru_cache(maxsize=200_000)
def _first_synset(word: str) -> Any:
    found = _wordnet().synsets(word)
    return found[0] if found else None


@functools.lru_cache(maxsize=200_000)
def substitution_set(word: str, max_set: int = 16, sets: str = "classes") -> tuple[str, ...]:
    """The fixed substitution set of a word (lower-cased); {word} for stop words, non-ASCII
    words and words WordNet does not know.

    * ``classes`` (default): the word's class is its first (most frequent) WordNet synset; the
      set is every single-word lemma of that synset whose own first synset is the same, sorted,
      the first ``max_set`` of them. Sets are therefore *symmetric* (v in S(w) exactly when
      S(v) = S(w)), which is what makes the certificate tight (docs/smoothing.md).
    * ``wordnet``: the word and its single-word lemmas over all its synsets, in WordNet's order
      (TextFooler's candidate source); wider, but asymmetric, so the certificate is weak."""
    w = word.lower()
    if sets not in SETS:
        raise ValueError(f"synonym sets must be one of {SETS}, got {sets!r}")
    if not _candidate(w):
        return (w,)
    if sets == "classes":
        first = _first_synset(w)
        if first is None:
            return (w,)
        # an inflected form ("actors") is not a lemma of its synset: its set stays {word}
        members = sorted({v.lower() for v in first.lemma_names() if _candidate(v.lower())})
        members = [v for v in members if _first_synset(v) == first][:max_set]
        return tuple(members) if w in members else (w,)
    out = [w]
    for syn in _wordnet().synsets(w):
        for lemma in syn.lemma_names():
            cand = lemma.lower()
            if _candidate(cand) and cand not in out:
                out.append(cand)
            if len(out) >= max_set:
                return tuple(out)
    return tuple(out)


class Perturbation:
    """Draws each unit independently; subclasses define the per-unit distribution."""

    name: ClassVar[str] = "perturbation"
    certifies: ClassVar[str | None] = None  # what a certificate covers, None: no certificate

    def __init__(self, rate: float) -> None:
        if not 0.0 <= rate <= 1.0:
            raise ValueError(f"{self.name}: rate must be in [0, 1], got {rate}")
        self.rate = float(rate)

    def draw(self, unit: str, rng: random.Random) -> str:
        raise NotImplementedError

    def __call__(self, text: str, rng: random.Random) -> str:
        u = units_of(text)
        return u.join([self.draw(x, rng) for x in u.units])

    def unit_distance(self, unit: str) -> float:
        """The largest total-variation distance between this unit's distribution and that of
        any unit an attacker may put in its place (what the certificate covers)."""
        raise NotImplementedError(f"{self.name} perturbations have no certificate")

    def describe(self) -> dict[str, Any]:
        return {"perturbation": self.name, "rate": self.rate, "certifies": self.certifies}


PERTURBATIONS: Registry[Perturbation] = Registry("smoothing perturbation")


@PERTURBATIONS.register("synonym")
class Synonym(Perturbation):
    """SAFER-style random substitution within fixed WordNet sets (module docstring)."""

    name: ClassVar[str] = "synonym"
    certifies: ClassVar[str | None] = "substitutions within the words' substitution sets"

    def __init__(self, rate: float = 1.0, max_set: int = 16, sets: str = "classes") -> None:
        super().__init__(rate)
        if max_set < 1:
            raise ValueError(f"synonym: max_set must be >= 1, got {max_set}")
        if sets not in SETS:
            raise ValueError(f"synonym: sets must be one of {SETS}, got {sets!r}")
        self.max_set, self.sets = int(max_set), sets

    def options(self, unit: str) -> tuple[str, ...]:
        return substitution_set(unit, self.max_set, self.sets)

    def draw(self, unit: str, rng: random.Random) -> str:
        if rng.random() >= self.rate:
            return unit
        options = self.options(unit)
        if len(options) == 1:
            return unit
        return _match_case(options[rng.randrange(len(options))], unit)

    def distribution(self, unit: str) -> dict[str, float]:
        """P(unit -> z) over the output strings (a redrawn word takes the unit's case)."""
        options = self.options(unit)
        if len(options) == 1:
            return {unit: 1.0}
        out: dict[str, float] = {}
        for z in options:
            key = _match_case(z, unit)
            out[key] = out.get(key, 0.0) + self.rate / len(options)
        out[unit] = out.get(unit, 0.0) + (1.0 - self.rate)
        return out

    def unit_distance(self, unit: str) -> float:
        """Worst case over the set's members written in the unit's case ("Film" for "Movie"),
        the unit itself aside: the substitutions the certificate covers. A mixed-case word
        written in its case is another text ("Mckinsey" for "McKinsey", a one-member set's only
        substitute), at distance 1 when nothing else can be drawn for it."""
        p = self.distribution(unit)
        worst = 0.0
        for v in self.options(unit):
            if _match_case(v, unit) == unit:
                continue
            q = self.distribution(_match_case(v, unit))
            tv = 0.5 * sum(abs(p.get(z, 0.0) - q.get(z, 0.0)) for z in set(p) | set(q))
            worst = max(worst, tv)
        return min(worst, 1.0)

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "max_set": self.max_set, "sets": self.sets}


@PERTURBATIONS.register("mask")
class Mask(Perturbation):
    """RanMASK-style random masking (module docstring); ``token=""`` deletes the unit."""

    name: ClassVar[str] = "mask"
    certifies: ClassVar[str | None] = "any substitution of up to k units"

    def __init__(self, rate: float = 0.3, token: str = "") -> None:
        super().__init__(rate)
        self.token = token

    def draw(self, unit: str, rng: random.Random) -> str:
        return self.token if rng.random() < self.rate else unit

    def unit_distance(self, unit: str) -> float:
        # masked, the unit looks the same whatever it was: the distributions share that mass
        return 1.0 - self.rate

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "token": self.token}


@PERTURBATIONS.register("char")
class Char(Perturbation):
    """Character noise (module docstring); no certificate."""

    name: ClassVar[str] = "char"

    def __init__(self, rate: float = 0.05) -> None:
        super().__init__(rate)

    def draw(self, unit: str, rng: random.Random) -> str:
        chars = list(unit)
        out: list[str] = []
        i = 0
        while i < len(chars):
            ch = chars[i]
            if not ch.isalpha() or rng.random() >= self.rate:
                out.append(ch)
                i += 1
                continue
            op = rng.randrange(3)
            if op == 0:  # delete
                pass
            elif op == 1:  # double
                out += [ch, ch]
            elif i + 1 < len(chars):  # swap with the next character
                out += [chars[i + 1], ch]
                i += 1
            else:
                out.append(ch)
            i += 1
        return "".join(out) or unit


def load(spec: str | Perturbation, **options: Any) -> Perturbation:
    """A perturbation by name (``synonym``, ``mask``, ``char``) with its options, or as given."""
    if isinstance(spec, Perturbation):
        if options:
            raise ValueError("options are for a perturbation given by name")
        return spec
    from robusteval.registry import build

    return build(PERTURBATIONS.get(spec), options, f"perturbation {spec!r}")
