"""Text hygiene at robusteval's boundaries: invalid Unicode and invisible-only text.

Two questions are asked of every text that enters robusteval (a loaded file, a sample given
to ``Metric.score`` or ``Detector.detect``), once, at the boundary:

* **Is it valid Unicode?** A Python ``str`` can hold a *lone surrogate* (``"\\ud800"``, e.g.
  from the JSON escape ``"\\ud800"``), which is not a character and cannot be encoded as
  UTF-8; tokenizers, spaCy and model servers fail on it with foreign exceptions.
  :func:`check_text` turns it into an :class:`~robusteval.errors.InputError` naming the
  sample and the field; :func:`invalid_unicode` says what is wrong (or ``None``).
* **Is anything visible left?** :func:`is_blank` is True for text made only of whitespace,
  control and format characters (Unicode categories Cc, Cf, Zs, Zl, Zp: zero-width spaces,
  joiners, bidi marks, BOM...) and the other default-ignorable code points (variation
  selectors, Hangul fillers, tag characters...). Such text is *empty text* and every metric
  and detector treats it as it treats ``""``. Invisible characters *inside* visible text are
  legitimate (ZWNJ in Persian ``"می‌خواهم"``, ZWJ in Devanagari conjuncts) and never make a
  text blank.

    >>> is_blank("\\u200b\\u200d \\u2060"), is_blank("می\\u200cخواهم")
    (True, False)
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterator
from typing import Any

from robusteval.errors import InputError

INVISIBLE_CATEGORIES = frozenset({"Cc", "Cf", "Zs", "Zl", "Zp"})

# Default_Ignorable_Code_Point (Unicode DerivedCoreProperties.txt) outside the categories
# above, plus U+2800 BRAILLE PATTERN BLANK (renders as nothing; a known "blank text" trick).
_IGNORABLE_RANGES = (
    (0x034F, 0x034F),  # combining grapheme joiner
    (0x115F, 0x1160),  # Hangul choseong / jungseong fillers
    (0x17B4, 0x17B5),  # Khmer inherent vowels
    (0x180B, 0x180F),  # Mongolian free variation selectors
    (0x2065, 0x2065),
    (0x2800, 0x2800),  # braille pattern blank
    (0x3164, 0x3164),  # Hangul filler
    (0xFE00, 0xFE0F),  # variation selectors
    (0xFFA0, 0xFFA0),  # halfwidth Hangul filler
    (0xFFF0, 0xFFF8),
    (0xE0000, 0xE0FFF),  # tags and variation selectors supplement
)
_IGNORABLE = frozenset(cp for lo, hi in _IGNORABLE_RANGES for cp in range(lo, hi + 1))


def is_invisible(ch: str) -> bool:
    """True for one character that shows nothing on its own (see the module docstring)."""
    return ch.isspace() or unicodedata.category(ch) in INVISIBLE_CATEGORIES or ord(ch) in _IGNORABLE


def is_blank(text: str | None) -> bool:
    """True when ``text`` is None, empty, or has no visible character at all."""
    if not text:
        return True
    return all(is_invisible(ch) for ch in text)  # stops at the first visible character


def invalid_unicode(text: str) -> str | None:
    """Why ``text`` is not valid Unicode (a lone surrogate, with its position), or None."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return (f"invalid Unicode: lone surrogate U+{ord(text[exc.start]):04X} at character "
                f"{exc.start} (not a character; it cannot be encoded as UTF-8)")
    return None


def check_text(value: Any, sample_id: str, field: str) -> str:
    """``value`` if it is a valid Unicode string, else an InputError naming sample and field."""
    if not isinstance(value, str):
        raise InputError(sample_id, field, f"expected text, got {type(value).__name__}")
    problem = invalid_unicode(value)
    if problem is not None:
        raise InputError(sample_id, field, problem)
    return value


def sample_texts(sample: Any) -> Iterator[tuple[str, Any]]:
    """(field, value) for every text a metric or detector may read from ``sample``:
    ``response``, ``context[i]``, ``reference``, ``references[i]``, ``fact``, ``answer``
    (absent optional fields are skipped)."""
    yield "response", sample.response
    for i, turn in enumerate(sample.context):
        yield f"context[{i}]", turn
    if sample.reference is not None:
        yield "reference", sample.reference
    for i, ref in enumerate(sample.references):
        yield f"references[{i}]", ref
    if sample.fact is not None:
        yield "fact", sample.fact
    if sample.answer is not None:
        yield "answer", sample.answer


def check_sample_text(sample: Any) -> None:
    """Raise InputError for the first field of ``sample`` that is not valid text."""
    sid = str(sample.id)
    if isinstance(sample.context, str | bytes) or not isinstance(sample.context, tuple | list):
        raise InputError(sid, "context", f"expected a tuple of turns, got {type(sample.context).__name__}")
    if isinstance(sample.references, str | bytes) or not isinstance(sample.references, tuple | list):
        raise InputError(sid, "references",
                         f"expected a tuple of texts, got {type(sample.references).__name__}")
    for field, value in sample_texts(sample):
        check_text(value, sid, field)


# Scripts written without spaces between words: a "word" of :func:`words` is a whole phrase or
# sentence there. Its word count is estimated from its length: about two characters per word
# for Chinese and Japanese, about four code points (consonants plus vowel signs) per word for
# the Southeast Asian scripts. An approximation, documented as one; it only has to tell a word
# from a phrase.
CHARS_PER_WORD = {"CJK": 2.0, "HIRAGANA": 2.0, "KATAKANA": 2.0, "THAI": 4.0, "LAO": 4.0, "KHMER": 4.0,
                  "MYANMAR": 4.0,
                  # the prolonged sound mark "ー" (KATAKANA-HIRAGANA ...) and the iteration marks "々",
                  # "〆", "〇" (IDEOGRAPHIC ...) are letters of Japanese and Chinese words, not words
                  # of their own (the ideographic punctuation under that name is no word character)
                  "KATAKANA-HIRAGANA": 2.0, "IDEOGRAPHIC": 2.0}


def unsegmented(ch: str) -> float | None:
    """Characters per word of ``ch``'s script when it is written without spaces, else None."""
    return CHARS_PER_WORD.get(unicodedata.name(ch, "").split(" ", 1)[0])


def estimated_words(token: str) -> float:
    """About how many words one space-free token holds: its characters of unsegmented scripts
    by :data:`CHARS_PER_WORD`, plus one for any other characters (a spaced word, a number)."""
    if token.isascii():  # the common case, without a Unicode name lookup per character
        return 1.0 if token else 0.0
    seg = unseg = 0.0
    for ch in token:
        per = unsegmented(ch)
        if per is None:
            seg = 1.0
        else:
            unseg += 1.0 / per
    return seg + unseg


def word_char(ch: str) -> bool:
    """A letter or digit of any script, or a combining mark."""
    # letters and digits of any script, and the combining marks that belong to them (Thai,
    # Devanagari and Arabic vowel signs are marks, not letters: without them words split apart)
    return ch.isalnum() or unicodedata.category(ch)[0] == "M"


def words(text: str) -> list[str]:
    """Lower-cased words: runs of letters, digits and combining marks, with one inner
    apostrophe kept ("don't", "i'm")."""
    text = text.lower().replace("’", "'")
    out: list[str] = []
    cur: list[str] = []
    for i, ch in enumerate(text):
        if word_char(ch) or (ch == "'" and cur and "'" not in cur and i + 1 < len(text) and word_char(text[i + 1])):
            cur.append(ch)
        elif cur:
            out.append("".join(cur))
            cur = []
    if cur:
        out.append("".join(cur))
    return out
