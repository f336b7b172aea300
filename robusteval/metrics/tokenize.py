"""Unicode-aware word tokenization for the lexical metrics (ROUGE, METEOR, BLEU's script check).

Why: rouge-score's default tokenizer keeps only ``[a-z0-9]`` and drops every other character,
so identical Russian, Arabic, Hindi or Chinese texts score 0, and Python's ``re`` ``\\w``
stops at combining marks, so Devanagari words (``मुझे`` = म + ु + झ + े) fall apart. This
module tokenizes every script the same way while giving *exactly* rouge-score's tokens on
ASCII text, so English scores do not move:

* the text is case-folded (``str.casefold``) and NFC-normalized, so precomposed and decomposed
  accents match; compatibility forms (full-width letters, ligatures) are *not* folded, since
  that would silently undo a class of attacks this toolkit measures;
* a word is a letter or digit followed by letters, digits, combining marks (categories
  Mn/Mc/Me: Indic vowel signs and viramas, Arabic harakat, Latin accents) and the joiners
  ZWNJ/ZWJ; everything else (punctuation, symbols, emoji, underscores, other invisible
  format characters) separates words, exactly as rouge-score treats non-alphanumerics;
* scripts written without spaces between words (:data:`UNSEGMENTED_SCRIPTS`: Han, kana,
  Thai, Lao, Khmer, Myanmar...) are split into one token per character (with its combining
  marks), so Chinese text gets character n-gram overlap, the usual practice for ROUGE on
  Chinese when no word segmenter is pinned;
* with stemming, the Porter stemmer (rouge-score's, from nltk) is applied to Latin-script
  tokens longer than 3 characters (rouge-score's rule); other scripts are never stemmed.

Character classes come from the ``regex`` package's Unicode database (``regex`` is already
required by nltk and sacrebleu); its version is part of :meth:`UnicodeTokenizer.signature`.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable
from functools import lru_cache

import regex

#: Unicode scripts (``Script_Extensions`` names) conventionally written without spaces
#: between words; their letters become one token each.
UNSEGMENTED_SCRIPTS: tuple[str, ...] = (
    "Han", "Hiragana", "Katakana", "Bopomofo", "Yi", "Thai", "Lao", "Khmer", "Myanmar",
    "Tai_Tham", "Tai_Le", "New_Tai_Lue", "Tai_Viet", "Javanese", "Balinese",
)

_UNSEG = "".join(rf"\p{{scx={s}}}" for s in UNSEGMENTED_SCRIPTS)
# combining marks and ZWNJ/ZWJ stay inside their word; variation selectors and enclosing marks
# (emoji presentation, keycaps) are presentation, not spelling, so they separate like symbols
_ATTACHED = r"[[\p{M}--[\p{Me}\uFE00-\uFE0F\U000E0100-\U000E01EF]]\u200c\u200d]"
_UNSEG_LETTER = rf"[[\p{{L}}\p{{N}}]&&[{_UNSEG}]]{_ATTACHED}*"


def _word(extra: str = "") -> str:
    return rf"(?:[[\p{{L}}\p{{N}}{extra}]--[{_UNSEG}]]{_ATTACHED}*)+"


#: ROUGE tokens: words and single characters of unsegmented scripts; nothing else.
_ROUGE_RE = regex.compile(rf"{_word()}|{_UNSEG_LETTER}", regex.V1)
#: METEOR tokens: as nltk's usual ``\w+|[^\w\s]`` on ASCII (underscores inside words,
#: each punctuation mark or symbol a token: one grapheme cluster, so an emoji ZWJ sequence
#: stays whole); control and invisible format characters are not tokens.
_WORD_PUNCT_RE = regex.compile(
    rf"{_word('_')}|{_UNSEG_LETTER}|(?=[^\s\p{{L}}\p{{N}}\p{{M}}\p{{Cc}}\p{{Cf}}_])\X", regex.V1)
_HAN_RE = regex.compile(r"[[\p{L}\p{N}]&&\p{scx=Han}]", regex.V1)
_OTHER_UNSEG_RE = regex.compile(rf"[[\p{{L}}\p{{N}}]&&[{_UNSEG}]--\p{{scx=Han}}]", regex.V1)
_LATIN_RE = regex.compile(r"[\p{Latin}0-9\p{Mn}]+")


def normalize(text: str) -> str:
    """Case-folded, NFC-normalized text (what every tokenizer here starts from)."""
    return unicodedata.normalize("NFC", text.casefold())


#: names :func:`word_tokens`' rules in reproducibility strings
WORD_TOKENS_VERSION = f"unicode-v1-punct(nfc+casefold,unsegmented=per-char,regex={regex.__version__})"


def word_tokens(text: str) -> list[str]:
    """Word and punctuation tokens in any script (METEOR's input).

    On ASCII text this equals ``re.findall(r"\\w+|[^\\w\\s]", text.lower())``."""
    return _WORD_PUNCT_RE.findall(normalize(text))


def unsegmented(text: str) -> tuple[bool, bool]:
    """Whether ``text`` has Han letters, and letters of the other unsegmented scripts."""
    return _HAN_RE.search(text) is not None, _OTHER_UNSEG_RE.search(text) is not None


class UnicodeTokenizer:
    """rouge-score tokenizer (``RougeScorer(..., tokenizer=UnicodeTokenizer())``) for any script.

    >>> UnicodeTokenizer().tokenize("Мне очень жаль.")
    ['мне', 'очень', 'жаль']
    >>> UnicodeTokenizer().tokenize("我很抱歉")
    ['我', '很', '抱', '歉']
    >>> UnicodeTokenizer(stem=True).tokenize("The cats were running")
    ['the', 'cat', 'were', 'run']
    """

    version: str = "unicode-v1"

    def __init__(self, stem: bool = False) -> None:
        self.stem = stem
        self._stem: Callable[[str], str] | None = None
        if stem:
            from nltk.stem import porter  # rouge-score's own stemmer

            self._stem = lru_cache(maxsize=1 << 16)(porter.PorterStemmer().stem)

    def tokenize(self, text: str) -> list[str]:
        """The word tokens of ``text`` (see the module docstring for the rules)."""
        tokens: list[str] = _ROUGE_RE.findall(normalize(text))
        if self._stem is not None:
            stem = self._stem
            tokens = [stem(t) if len(t) > 3 and _LATIN_RE.fullmatch(t) else t for t in tokens]
        return tokens

    def signature(self) -> str:
        """Pins the rules, the stemmer and the Unicode data the classes came from."""
        stem = "porter-latin" if self.stem else "none"
        return (f"tok={self.version}(nfc+casefold,unsegmented=per-char,stem={stem},"
                f"regex={regex.__version__})")
