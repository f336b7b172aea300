"""A text cut into *units*: words (letters, digits and combining marks of any script, with one
inner apostrophe), and single characters (with their marks) in scripts written without spaces
(Han, Kana, Thai, Lao, Khmer, Myanmar, Tibetan), with the separators between them kept, so a
text rebuilt from its units keeps its layout in every script. Randomized smoothing perturbs
and certifies units (:mod:`robusteval.defenses.perturbations`); word-order rules reorder
them in unspaced text (:mod:`robusteval.attacks.dialogue_rules`).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from robusteval.langid import UNSPACED, script
from robusteval.text import word_char


@dataclass(frozen=True)
class Units:
    """A text cut into units and the separators around them: ``seps[0] u[0] seps[1] ... u[-1] seps[-1]``."""

    units: tuple[str, ...]
    seps: tuple[str, ...]

    def join(self, units: list[str]) -> str:
        out = [self.seps[0]]
        for u, sep in zip(units, self.seps[1:], strict=True):
            out += [u, sep]
        return re.sub(r"[ \t]{2,}", " ", "".join(out)).strip() if "" in units else "".join(out)


def _is_unit_char(text: str, i: int) -> bool:
    ch = text[i]
    if word_char(ch):
        return True
    # one inner apostrophe ("don't") belongs to the word
    return ch in "'’" and 0 < i < len(text) - 1 and word_char(text[i - 1]) and word_char(text[i + 1])


def units_of(text: str) -> Units:
    """Words (letters, digits and combining marks of any script, :func:`robusteval.text.word_char`),
    with unspaced-script runs split into single characters (see the module docstring)."""
    units: list[str] = []
    seps: list[str] = []
    sep_start = 0
    i = 0
    while i < len(text):
        if not word_char(text[i]):  # an apostrophe joins a word, it never starts one
            i += 1
            continue
        seps.append(text[sep_start:i])
        if script(text[i]) in UNSPACED:
            j = i + 1
            while j < len(text) and unicodedata.category(text[j])[0] == "M":  # a character and its marks
                j += 1
        else:
            j = i
            while j < len(text) and _is_unit_char(text, j) and script(text[j]) not in UNSPACED:
                j += 1
        units.append(text[i:j])
        sep_start = i = j
        if i < len(text) and _is_unit_char(text, i):
            continue  # the next unit starts right here (an unspaced character after a word)
    seps.append(text[sep_start:])
    # units that touch have an empty separator between them
    return Units(tuple(units), tuple(seps))


def changed_units(a: str, b: str) -> int | None:
    """How many units ``b`` changed in ``a`` (case counts), or None when the two do not cut into
    the same number of units with the same separators (outside any certificate)."""
    ua, ub = units_of(a), units_of(b)
    if ua.seps != ub.seps or len(ua.units) != len(ub.units):
        return None
    return sum(x != y for x, y in zip(ua.units, ub.units, strict=True))
