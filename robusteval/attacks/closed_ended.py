"""Closed-ended fact swaps, after the KdConv-ADV / DSTC7-ADV adversarial sets of Liu et al.
(adversarial references for knowledge-grounded dialogue made by swapping the key fact).

The response keeps its wording but its key entity, number, date or place is replaced so it
contradicts the context or fact, with little lexical change. Replacements come first from
same-type mentions elsewhere in the context / fact (so the result contradicts them with a
plausible value); numbers, years, months and weekdays that have no such mention are shifted
instead. ``R-``: a sound metric must score the swapped response lower.
"""

from __future__ import annotations

import random
import re
from typing import Any, ClassVar

from robusteval.attacks.base import ENGLISH, Perturbation
from robusteval.attacks.registry import register_attack
from robusteval.llm.backends import LazyBackend
from robusteval.nlp import LABELS, swap_mention
from robusteval.types import Sample

SOURCE = "Liu et al. (KdConv-ADV / DSTC7-ADV closed-ended adversarial references)"


class _FactSwap(Perturbation):
    languages: ClassVar[tuple[str, ...]] = ENGLISH
    family: ClassVar[str] = "closed-ended"
    source: ClassVar[str] = SOURCE
    direction: ClassVar[str] = "R-"
    kind: ClassVar[str] = "entity"
    targets: ClassVar[tuple[str, ...]] = ("consistency", "groundedness", "faithfulness",
                                         "non-contradiction")
    keeps: ClassVar[tuple[str, ...]] = ("fluency", "grammaticality")

    def perturb(self, sample: Sample, rng: random.Random) -> str | None:
        # the first mention is taken as the key fact; only numbers and dates can be shifted
        return swap_mention(sample, LABELS[self.kind], rng, first=True,
                            shift=self.kind in ("number", "date"))


@register_attack
class FactSwapEntity(_FactSwap):
    """Swap the response's key named entity (person, organization, work...) for another."""

    name: ClassVar[str] = "fact-swap-entity"
    kind: ClassVar[str] = "entity"


@register_attack
class FactSwapNumber(_FactSwap):
    """Change the response's key number."""

    name: ClassVar[str] = "fact-swap-number"
    kind: ClassVar[str] = "number"


@register_attack
class FactSwapDate(_FactSwap):
    """Change the response's key date or time."""

    name: ClassVar[str] = "fact-swap-date"
    kind: ClassVar[str] = "date"


@register_attack
class FactSwapPlace(_FactSwap):
    """Swap the response's key place for another."""

    name: ClassVar[str] = "fact-swap-place"
    kind: ClassVar[str] = "place"


# -- DSTC7-ADV (Liu et al. §3.2, Table 1): negation and count changes of the reference ----------

DSTC7_SOURCE = "Liu et al., Evaluate What You Can't Evaluate (DSTC7-ADV), §3.2 and Table 1"
CONTRACTIONS = {"'s": " is", "'re": " are", "'m": " am"}
NEGATABLE = ("can", "could", "will", "would", "should", "must", "is", "are", "was", "were", "am",
             "does", "do", "did", "has", "have", "had", "may", "might")
NOT_COUNTED = frozenset({"i", "you", "he", "she", "we", "they", "it", "of", "that", "which", "who", "is", "was",
                         "are", "were", "and", "or", "more", "another", "day", "time"})
NUMBER_WORDS = ["one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"]


def dstc7_negate(text: str) -> str | None:
    """DSTC7-ADV's negation transformation (Liu et al. §3.2): the first "only" becomes "not only"
    (a contraction just before it is expanded: "there's only" -> "there is not only"), else the
    first auxiliary or modal not already negated gets "not" ("can" -> "can not", "is" -> "is
    not"). None when the text has neither."""
    m = re.search(r"\b(\w+)('s|'re|'m)?\s+(only)\b", text, re.IGNORECASE)
    if m and m.group(1).lower() != "not":
        head = m.group(1) + (CONTRACTIONS[m.group(2).lower()] if m.group(2) else "")
        return text[:m.start()] + f"{head} not {m.group(3)}" + text[m.end():]
    m = re.search(r"\b(only)\b", text, re.IGNORECASE)
    if m and m.start() == 0:
        return "Not o" + text[1:] if text[0] == "O" else "not " + text
    pattern = r"\b(" + "|".join(NEGATABLE) + r")\b(?!\s*(?:not\b|n't|'t))"
    for m in re.finditer(pattern, text, re.IGNORECASE):
        if m.group(1) == "May" and m.start() > 0:  # the month, not the modal
            continue
        return text[:m.end()] + " not" + text[m.end():]
    m = re.search(r"\b(\w+)('s|'re|'m)\b(?!\s*not\b)", text, re.IGNORECASE)
    if m and m.group(2).lower() in CONTRACTIONS:
        return text[:m.start()] + m.group(1) + CONTRACTIONS[m.group(2).lower()] + " not" + text[m.end():]
    return None


def dstc7_count(text: str, rng: random.Random) -> str | None:
    """DSTC7-ADV's count change (Liu et al., Table 1: "one person" -> "two persons", "seven
    persons"): the first number word or digit becomes another count, and a singular noun right
    after "one" / "a single" is made plural. None when the text states no count."""
    pattern = r"\b(one|two|three|four|five|six|seven|eight|nine|ten|\d+|a single)\b(\s+)([A-Za-z]+)?"
    for m in re.finditer(pattern, text, re.IGNORECASE):
        word, noun = m.group(1).lower(), (m.group(3) or "").lower()
        if word.isdigit() and not 1 <= int(word) <= 10:
            continue  # a year or a large number, not a count of things
        if not noun or noun in NOT_COUNTED:
            continue  # "the one I like", "one of them": no counted noun follows
        break
    else:
        return None
    old = m.group(1).lower()
    value = 1 if old in ("one", "a single") else (NUMBER_WORDS.index(old) + 1 if old in NUMBER_WORDS else int(old))
    new_value = rng.choice([v for v in range(1, 11) if v != value])
    new = NUMBER_WORDS[new_value - 1] if not old.isdigit() else str(new_value)
    if m.group(1)[:1].isupper():
        new = new.capitalize()
    noun = m.group(3) or ""
    if noun and value == 1 and new_value != 1:
        from lemminflect import getInflection

        plural = getInflection(noun, tag="NNS")
        noun = plural[0] if plural and noun.isalpha() else noun
    elif noun and value != 1 and new_value == 1:
        from lemminflect import getLemma

        singular = getLemma(noun, upos="NOUN")
        noun = singular[0] if singular else noun
    return text[:m.start()] + new + m.group(2) + noun + text[m.end():]


class _DSTC7(Perturbation):
    languages: ClassVar[tuple[str, ...]] = ENGLISH
    family: ClassVar[str] = "closed-ended"
    source: ClassVar[str] = DSTC7_SOURCE
    direction: ClassVar[str] = "R-"
    targets: ClassVar[tuple[str, ...]] = _FactSwap.targets
    keeps: ClassVar[tuple[str, ...]] = _FactSwap.keeps


@register_attack
class DSTC7Negation(_DSTC7):
    """Negate the response as DSTC7-ADV does ("only" -> "not only", "can" -> "can not", "is" ->
    "is not"; Liu et al. §3.2, Table 1), so it contradicts the facts with high lexical overlap."""

    name: ClassVar[str] = "dstc7-negation"

    def perturb(self, sample: Sample, rng: random.Random) -> str | None:
        return dstc7_negate(sample.response)


@register_attack
class DSTC7Count(_DSTC7):
    """Change the count the response states ("one person" -> "two persons"; Liu et al., DSTC7-ADV
    Table 1), so it contradicts the facts with high lexical overlap."""

    name: ClassVar[str] = "dstc7-count"

    def perturb(self, sample: Sample, rng: random.Random) -> str | None:
        return dstc7_count(sample.response, rng)


# -- KdConv-ADV (Liu et al. §3.1): LLM candidates with falsified key facts, lowest BLEU kept -----

KDCONV_SOURCE = "Liu et al., Evaluate What You Can't Evaluate (KdConv-ADV), §3.1 and Table 1"


@register_attack
class KdConvADV(Perturbation):
    """KdConv-ADV's closed-ended construction (Liu et al. §3.1): an LLM (any backend of
    :mod:`robusteval.llm`: the local SmolLM2 or an OpenAI-compatible server) writes five
    candidate responses to the dialogue history; each candidate's key fact is falsified (its
    first entity / number / date swapped for another the response does not name, or shifted;
    else the candidate is negated as in DSTC7-ADV); the ``keep`` (3) with the lowest sentence
    BLEU against the reference response are kept. The paper keeps all three as test examples;
    robusteval's row is the lowest-BLEU one and ``meta["kept"]`` lists the three."""

    name: ClassVar[str] = "kdconv-adv"
    languages: ClassVar[tuple[str, ...]] = ENGLISH
    family: ClassVar[str] = "closed-ended"
    source: ClassVar[str] = KDCONV_SOURCE
    direction: ClassVar[str] = "R-"
    tasks: ClassVar[tuple[str, ...]] = ("dialogue",)
    targets: ClassVar[tuple[str, ...]] = _FactSwap.targets
    keeps: ClassVar[tuple[str, ...]] = _FactSwap.keeps
    needs_llm: ClassVar[bool] = True

    def __init__(self, generator: Any = None, candidates: int = 5, keep: int = 3, temperature: float = 0.8,
                 max_new_tokens: int = 200, seed: int = 0) -> None:
        super().__init__(seed=seed)
        if keep < 1 or candidates < keep:
            raise ValueError(f"kdconv-adv needs 1 <= keep <= candidates, got keep={keep}, candidates={candidates}")
        self._spec = generator
        self.n_candidates, self.keep = candidates, keep
        self.temperature, self.max_new_tokens = temperature, max_new_tokens
        self.last_kept: list[str] = []

    generator = LazyBackend("_spec")

    def language_text(self, sample: Sample) -> str:
        return "\n".join(sample.context) or sample.response  # the LLM answers the history

    def prompt(self, sample: Sample) -> str:
        history = "\n".join(sample.context)
        fact = f"Knowledge:\n{sample.fact}\n\n" if sample.fact else ""
        return (f"{fact}Dialogue history:\n{history}\n\nWrite {self.n_candidates} different possible next "
                "responses, one per line, numbered 1 to " + f"{self.n_candidates}.\n1.")

    def falsify(self, sample: Sample, text: str, rng: random.Random) -> str | None:
        return swap_mention(sample.with_response(text), None, rng, first=True, shift=True) or dstc7_negate(text)

    def perturb(self, sample: Sample, rng: random.Random) -> str | None:
        import sacrebleu

        from robusteval.llm import call_with
        from robusteval.llm.clean import clean_candidate

        outs = call_with(self.generator.generate, [self.prompt(sample)], optional={"ids": [sample.id]}, n=1,
                         temperature=self.temperature, max_new_tokens=self.max_new_tokens, seed=self.seed)[0]
        if not outs:  # the backend fell back (a failed request it was told to tolerate)
            return None
        lines = [clean_candidate(line) for line in ("1." + outs[0]).splitlines()]
        written = [c for c in dict.fromkeys(lines) if c][: self.n_candidates]
        falsified = [f for f in (self.falsify(sample, c, rng) for c in written) if f]
        if not falsified:
            return None
        reference = sample.reference or sample.response
        bleu = {c: sacrebleu.sentence_bleu(c, [reference]).score for c in dict.fromkeys(falsified)}
        self.last_kept = sorted(bleu, key=lambda c: (bleu[c], c))[: self.keep]
        return self.last_kept[0]

    def run(self, sample: Sample, victim: Any = None, budget: int | None = None) -> Any:
        self.last_kept = []
        result = super().run(sample, victim, budget)
        result.meta["kept"] = list(self.last_kept)
        return result
