"""Sanitizing a response before it is scored: the ``sanitize`` guard policy.

Validator frameworks give a failing check a *fix* action besides refusing the input; this is
robusteval's. :func:`sanitize` removes what no honest response needs and records each removal:

* **role prefixes** -- a known role label and its colon at the start of the response or of a
  line (``"teacher: ..."``, ``"[user]: ..."``), the attack of Vasselli & Watanabe (Table 2).
  The labels are ``speaker_tag``'s package list; an unknown label (``"Bob:"``) is kept,
  because it may be content;
* **invisible and control characters** -- format, control (except newline, tab, carriage
  return; the control characters that end a line, U+000B, U+000C, U+001C-U+001E and U+0085,
  become newlines, recorded as ``line_breaks``), private-use, surrogate and unassigned code
  points, and the default-ignorable ones of :func:`robusteval.text.is_invisible`; a zero-width
  (non-)joiner that spells a word in a script that uses it (Persian ZWNJ, Devanagari conjuncts),
  an emoji's ZWJ sequence and presentation selector, and a directional mark in right-to-left
  text are kept (:func:`robusteval.detectors.nonalnum.spelling_mark`);
* **homoglyphs** -- inside a token that mixes Latin with Cyrillic or Greek letters, the
  lookalike letters (Unicode TS #39, ``confusables.txt``) are mapped to one script: to Latin
  when every non-Latin letter is a lookalike of a Latin one (``"pаypal"`` with a Cyrillic a,
  and ``"tеасһеr"`` with five of seven letters Cyrillic, become Latin), to Cyrillic or Greek
  when every Latin letter is a lookalike of that script's (a Russian word with one Latin
  ``a``), else to the majority script. In Cyrillic or Greek text, tokens in one script are
  never touched, so Russian or Greek text is left as it is. A whole word spelled in Cyrillic
  or Greek lookalikes of Latin letters that :func:`robusteval.detectors.nonalnum.lookalike_tokens`
  reads as a disguise (``"һоԝ"`` or a Cyrillic ``"і"`` in Latin text; since ``nonalnum`` v4
  also ``"һоԝ"`` beside a real Russian word, or a reply ``"Неӏӏо"`` alone) is mapped to
  Latin too; in Cyrillic text, Russian ``"а"`` or ``"ВОТ"`` are words and stay (in Latin text,
  ``"user: ВОТ ТАК"`` included, they read as ``"BOT TAK"``). This runs
  before role prefixes are removed, so a disguised label (``"tеасһеr:"``) is recognized once
  it is spelled in Latin.

Whitespace runs left by a removal are collapsed. The result is deterministic and idempotent.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from robusteval.detectors.nonalnum import (
    CONFUSABLE_SCRIPTS,
    char_script,
    hidden_char,
    lookalike_tokens,
    spelling_mark,
    to_latin,
)
from robusteval.detectors.speaker_tag import LINE_BREAKS, ROLE_PREFIX, tag_label

_KEEP = {"\n", "\t", "\r", " "}


@dataclass
class Sanitized:
    """A cleaned text and what was removed from it."""

    text: str
    removed: dict[str, Any] = field(default_factory=dict)

    @property
    def changed(self) -> bool:
        return bool(self.removed)


@functools.lru_cache(maxsize=1)
def lookalikes() -> dict[str, dict[str, str]]:
    """Per script (CYRILLIC, GREEK): Latin letter -> that script's lookalike (the first one
    TS #39 lists). The sanitizer undoes them; the evasion attack
    (:mod:`robusteval.attacks.evasion`) uses them."""
    out: dict[str, dict[str, str]] = {}
    for foreign, latin in to_latin().items():
        out.setdefault(char_script(foreign), {}).setdefault(latin, foreign)
    return out


def _strip_roles(text: str, removed: dict[str, Any]) -> str:
    tags: list[str] = []

    def cut(m: Any) -> str:
        tagged = tag_label(m)
        if tagged is not None and tagged[1] == 1.0:  # a known role; an unknown label is content
            tags.append(tagged[0])
            return ""
        return m.group(0)

    out = text
    for _ in range(8):  # "teacher: user: hi" loses both labels, so a second pass finds nothing
        before, out = out, ROLE_PREFIX.sub(cut, out)
        if out == before:
            break
    if tags:
        removed.setdefault("role_prefixes", []).extend(tags)
    return out


#: control characters that end a line (``str.splitlines``): written as "\n", not deleted, so the
#: words on either side stay apart ("x\x85user: hi" is not "xuser: hi") and ``speaker_tag`` reads
#: the same lines before and after
_CONTROL_BREAKS = frozenset("\x0b\x0c\x1c\x1d\x1e\x85")


def _strip_invisible(text: str, removed: dict[str, Any]) -> str:
    gone: Counter[str] = Counter()
    breaks: Counter[str] = Counter()
    kept = []
    for i, ch in enumerate(text):
        if ch in _KEEP:
            kept.append(ch)
            continue
        if ch in _CONTROL_BREAKS:
            breaks[f"U+{ord(ch):04X}"] += 1
            kept.append("\n")
            continue
        if hidden_char(ch) and not spelling_mark(text, i):
            gone[f"U+{ord(ch):04X}"] += 1
            continue
        kept.append(ch)
    if gone:
        removed["invisible"] = dict(sorted(gone.items()))
    if breaks:
        removed["line_breaks"] = dict(sorted(breaks.items()))
    return "".join(kept)


def _as_latin(token: str) -> str:
    """Every Cyrillic or Greek lookalike in ``token`` replaced by its Latin letter."""
    table = to_latin()
    return "".join(table.get(c, c) if char_script(c) != "LATIN" else c for c in token)


def _fix_token(token: str) -> str:
    counts = Counter(char_script(c) for c in token if c.isalpha())
    mixed = [s for s in counts if s in CONFUSABLE_SCRIPTS]
    if len(mixed) < 2:
        return token
    latin_of = to_latin()
    foreign = [c for c in token if c.isalpha() and char_script(c) != "LATIN"]
    latin = [c for c in token if c.isalpha() and char_script(c) == "LATIN"]
    if all(c in latin_of for c in foreign):  # only lookalikes of Latin letters: a disguised Latin word
        major = "LATIN"
    elif all(any(c in table for table in lookalikes().values()) for c in latin):  # Latin intrusions
        major = max((s for s in mixed if s != "LATIN"), key=lambda s: counts[s])
    else:
        major = max(mixed, key=lambda s: (counts[s], s == "LATIN"))
    if major == "LATIN":
        return _as_latin(token)
    table = lookalikes().get(major, {})
    return "".join(table.get(c, c) if char_script(c) == "LATIN" else c for c in token)


def _fix_homoglyphs(text: str, removed: dict[str, Any]) -> str:
    parts = re.split(r"(\s+)", text)
    fixed = [_fix_token(p) if p and not p.isspace() else p for p in parts]
    # then whole lookalike words, read on the repaired text: a mixed token may have turned out Russian.
    # Until none is left: a word that nonalnum v4 maps in a text without Latin letters ("Неӏӏо ах")
    # makes the text Latin, and in Latin text a short Russian word of lookalikes ("ах") is one too,
    # so one pass would leave work for the next and sanitize would not be idempotent. Each pass
    # writes its words wholly in Latin, so the loop ends.
    words = [i for i, p in enumerate(fixed) if p and not p.isspace()]  # in str.split() order
    while posing := lookalike_tokens("".join(fixed)):
        for k in posing:
            fixed[words[k]] = _as_latin(fixed[words[k]])
    changes = [f"{a}->{b}" for a, b in zip(parts, fixed, strict=True) if a != b]
    if changes:
        removed.setdefault("homoglyphs", []).extend(changes)
    return "".join(fixed)


def skeleton(text: str, compatibility: bool = True) -> str:
    """A comparison key for text matching (Unicode TS #39's *skeleton*, restricted to the
    Cyrillic and Greek letters robusteval knows): NFKC, invisible and format characters removed,
    case folded, then every lookalike of a Latin letter mapped to it -- mixed-script or not.
    Two texts that look the same get the same skeleton, so a detector that compares strings
    (a copied turn, a known phrase) is not fooled by lookalike letters, a zero-width space or a
    full-width form. Not for display: a Russian "сор" and an English "cop" share one.

    ``compatibility=False`` folds only the width of full-width forms (and the ideographic
    space) instead of NFKC, whose compatibility forms make words of symbols ("№" is "No"):
    for patterns that look for words, :mod:`robusteval.detectors.judge_injection`."""
    table = to_latin()
    norm = unicodedata.normalize("NFKC", text) if compatibility else text.translate(_WIDTH)
    kept = (ch for ch in norm if not _hidden(ch))
    return "".join(table.get(ch, ch) for ch in "".join(kept).casefold())  # fold case first: "Н" and "н" agree


#: full-width ASCII forms (U+FF01-U+FF5E) and the ideographic space -> ASCII
_WIDTH = {**{o: o - 0xFEE0 for o in range(0xFF01, 0xFF5F)}, 0x3000: " "}


def _hidden(ch: str) -> bool:
    """A character the skeleton drops: format / control / unassigned, or invisible (not a space)."""
    return ch not in _KEEP and hidden_char(ch)


def skeleton_with_origin(text: str) -> tuple[str, list[int]]:
    """:func:`skeleton` computed character by character, with the index in ``text`` of the
    character each skeleton character comes from: a pattern found in the skeleton (a verdict
    label spelled with lookalike letters, split by a zero-width space, in full-width forms) can
    be located, and marked, in the original. Per character, so a sequence that NFKC composes
    across characters (a letter and a combining mark) may differ from :func:`skeleton`."""
    table = to_latin()
    out: list[str] = []
    origin: list[int] = []
    for i, ch in enumerate(text):
        for c in unicodedata.normalize("NFKC", ch):
            if _hidden(c):
                continue
            for folded in c.casefold():
                out.append(table.get(folded, folded))
                origin.append(i)
    return "".join(out), origin


def sanitize(text: str) -> Sanitized:
    """``text`` without role prefixes, invisible characters and homoglyphs (inside mixed-script
    tokens, and whole lookalike words that ``nonalnum`` reads as disguised Latin ones).

    Homoglyphs and role prefixes are repeated until neither changes the text: a label can hold
    the text's only real Cyrillic word ("user Б: а Неӏӏо"), and once it is gone "а" stands
    in Latin text, a disguise by ``nonalnum``'s reading; one pass would leave that for the next
    call, and sanitize would not be idempotent."""
    removed: dict[str, Any] = {}
    out = _strip_invisible(text, removed)
    # every pass that changes the text removes a label or writes a token wholly in one script
    # (a mixed token at most twice: to Cyrillic, then as a lookalike word to Latin), so this ends
    # well before the bound, which only guards against a bug looping forever
    for _ in range(2 * len(out) + 2):
        before = out
        out = _strip_roles(_fix_homoglyphs(out, removed), removed)
        if out == before:
            break
    if removed:
        out = re.sub(r"[ \t]{2,}", " ", out)
        # each line trimmed, whatever break ends it (a label cut after "\u2028" leaves a space)
        parts = re.split(f"([{LINE_BREAKS}])", out)
        out = "".join(p if i % 2 else p.strip() for i, p in enumerate(parts)).strip()
    return Sanitized(out, removed)
