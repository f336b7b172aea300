"""Closed-ended fact swaps, after the KdConv-ADV / DSTC7-ADV adversarial sets of Liu et al.
(adversarial references for knowledge-grounded dialogue made by swapping the key fact).

The response keeps its wording but its key entity, number, date or place is replaced so it
contradicts the context or fact, with little lexical change. Replacements come first from
same-type mentions elsewhere in the context / fact (so the result contradicts them with a
plausible value); numbers, years, months and weekdays that have no such mention are shifted
instead. ``R-``: a sound metric must score the swapped response lower.
"""

from __future__ import annotations

import calendar
import random
import re
from typing import ClassVar

from robusteval.attacks.base import Perturbation
from robusteval.attacks.registry import register_attack
from robusteval.types import Sample

SOURCE = "Liu et al. (KdConv-ADV / DSTC7-ADV closed-ended adversarial references)"
LABELS = {
    "entity": frozenset({"PERSON", "ORG", "NORP", "PRODUCT", "WORK_OF_ART", "EVENT"}),
    "number": frozenset({"CARDINAL", "QUANTITY", "MONEY", "PERCENT", "ORDINAL"}),
    "date": frozenset({"DATE", "TIME"}),
    "place": frozenset({"GPE", "LOC", "FAC"}),
}
MONTHS = [m for m in calendar.month_name if m]
DAYS = list(calendar.day_name)


def shift_numeric(text: str, rng: random.Random) -> str | None:
    """Change the first number, year, month or weekday in ``text``; None if there is none."""
    for names in (MONTHS, DAYS):
        for name in names:
            m = re.search(rf"\b{name}\b", text)
            if m:
                other = rng.choice([n for n in names if n != name])
                return text[:m.start()] + other + text[m.end():]
    m = re.search(r"\d+(?:[.,]\d+)*", text)
    if not m:
        return None
    digits = m.group(0)
    if re.fullmatch(r"(1[5-9]|20)\d\d", digits):  # a year
        new = str(int(digits) + rng.choice([-3, -2, -1, 1, 2, 3]))
    else:
        value = float(digits.replace(",", ""))
        new_value = value + rng.randint(1, 9) if value < 10 else value * rng.choice([2, 3]) + rng.randint(1, 9)
        new = str(int(new_value)) if "." not in digits else f"{new_value:.{len(digits.split('.')[-1])}f}"
    return text[:m.start()] + new + text[m.end():]


def swap_mention(sample: Sample, labels: frozenset[str] | None, rng: random.Random,
                 first: bool = True, shift: bool = True) -> str | None:
    """Replace one entity mention of the response (the first, or a seeded one) whose label is
    in ``labels`` (any label if None) by a same-label mention from the context / fact /
    reference that is not a variant of it; without one, shift a number/date if ``shift``."""
    from robusteval.nlp import load_spacy

    nlp = load_spacy()
    mentions = [e for e in nlp(sample.response).ents if labels is None or e.label_ in labels]
    if not mentions:
        return None
    target = mentions[0] if first else rng.choice(mentions)
    support = " ".join([*sample.context, sample.fact or "", sample.reference or ""])
    mine = target.text.lower()
    pool = sorted({e.text for e in nlp(support).ents if e.label_ == target.label_
                   and e.text.lower() not in mine and mine not in e.text.lower()})
    if pool:
        new: str | None = rng.choice(pool)
    elif shift:
        new = shift_numeric(target.text, rng)
    else:
        new = None
    if not new or new == target.text:
        return None
    return sample.response[: target.start_char] + new + sample.response[target.end_char:]


class _FactSwap(Perturbation):
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
