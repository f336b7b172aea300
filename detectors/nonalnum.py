"""[nonalnum] Runs and shares of non-alphanumeric characters, Unicode-aware.

Mu & Lim, "Universal Evasion Attacks on Summarization Scoring" (BlackboxNLP 2022), §6.2 and
Table 3, propose flagging outputs made of non-alphanumeric strings: their universal BERTScore
trigger is a single "." or a short punctuation string. This detector generalizes the check to
the whole of Unicode:

* letters, digits and combining marks of any script count as alphanumeric, so clean Chinese,
  Arabic, Hindi or Russian text is not flagged (the tests run it on xDial's machine translations);
* the longest run of consecutive non-alphanumeric, non-space characters (``"~&;$}%(`` is a
  run of 7; ordinary text rarely exceeds 3, e.g. ``?!"``) and their share of the
  non-space characters, counted as if the text had two letters more (version 2), so that a
  one-character word and its full stop ("예.", "是。") reads like English "No.";
* invisible or reserved characters (control, format / zero-width, private use, surrogates,
  unassigned) — none belongs in a response, except the zero-width (non-)joiners that spell
  words in the scripts that use them (Persian ZWNJ, Devanagari conjuncts), emoji ZWJ
  sequences, and (version 5) the directional marks of right-to-left text (RLM in Arabic or
  Hebrew, one at the edge of a word) and variation selectors that select a glyph (after an
  emoji or another symbol, a keycap digit, a CJK ideograph: :func:`spelling_mark`); a variation
  selector anywhere else, and every default-ignorable character (the combining grapheme
  joiner, Hangul fillers), is invisible (version 5);
* homoglyph tokens mixing letters of confusable scripts (Latin with Cyrillic or Greek), and
  (version 3) *whole-token* lookalikes: in Latin text, a word spelled only with Cyrillic or
  Greek letters that each look like a Latin one ("һоԝ", a Cyrillic "і"), Unicode TS #39's
  whole-script confusable (:func:`lookalike_tokens`, which states its limits). Boucher et al.
  2022 ("Bad Characters", IEEE S&P) swap whole words this way, and so does robusteval's own
  evasion attack (:mod:`robusteval.attacks.evasion`, ``lookalike-token``), which got past
  version 2. Version 4 also reads such a word where version 3 looked away (a text with no
  Latin letter, or with a real Cyrillic or Greek word beside it): it is a disguise when its
  Latin reading is a listed word of a Latin-script language and its own spelling is no listed
  word of Russian, Ukrainian, Bulgarian, Macedonian, Serbian or Greek (:func:`poses_as_word`);
* a response with no alphanumeric character at all.

Suspicion is the largest of the per-feature scores; the default threshold 0.5 is replaced by
a calibrated one with ``robusteval guard calibrate``.
"""

from __future__ import annotations

import functools
import json
import unicodedata
from typing import Any, ClassVar

from robusteval.detectors.base import Detector, register_detector, squash

from robusteval.langid import known_word
from robusteval.paths import resource
from robusteval.text import is_invisible
from robusteval.types import Sample

_ALLOWED_CONTROL = {"\n", "\t", "\r"}
#: letters added to a text's length in its non-alphanumeric share (version 2): without it a
#: one-character word and its full stop ("예.", "是。": words of one Hangul syllable or Han
#: character) had a share of 1/2 and were flagged at the default threshold, which English
#: "No." (1/3) never was
SHARE_PRIOR = 2
HIDDEN_CATEGORIES = {"Cc", "Cf", "Co", "Cs", "Cn"}
CONFUSABLE_SCRIPTS = {"LATIN", "CYRILLIC", "GREEK"}
#: the languages (wordfreq's lists) in which a word spelled only with Cyrillic or Greek
#: lookalikes of Latin letters may be a real word ("а", "вот", "ου")
OWN_LANGUAGES = {"CYRILLIC": ("ru", "uk", "bg", "mk"), "GREEK": ("el",)}
#: Gaj's Latin alphabet -> Vuk Karadžić's Cyrillic, for wordfreq's Serbo-Croatian list (``sh``),
#: which is kept in Latin script: Serbian Cyrillic words ("рекао", "ја") are real words too
_SERBIAN_DIGRAPHS = (("dž", "џ"), ("lj", "љ"), ("nj", "њ"))
_SERBIAN = str.maketrans(dict(zip("abcčćdđefghijklmnoprsštuvzž", "абцчћдђефгхијклмнопрсштувзж", strict=True)))


def char_script(ch: str) -> str:
    name = unicodedata.name(ch, "")
    head = name.split(" ", 1)[0]
    if head in {"CJK", "HIRAGANA", "KATAKANA", "HANGUL", "IDEOGRAPHIC"}:
        return "CJK"
    return head


_JOINERS = {"\u200c", "\u200d"}  # ZWNJ, ZWJ
# scripts whose spelling uses the joiners between their own letters: ZWNJ in Persian / Urdu
# (Arabic script), ZWJ / ZWNJ for conjuncts and half forms in the Brahmic scripts (Unicode
# Standard §23.2, "Layout Controls"); never in Latin, Cyrillic, Greek or CJK text
_JOINING_SCRIPTS = {"ARABIC", "SYRIAC", "NKO", "MONGOLIAN", "DEVANAGARI", "BENGALI", "GURMUKHI", "GUJARATI", "ORIYA",
                    "TAMIL", "TELUGU", "KANNADA", "MALAYALAM", "SINHALA", "TIBETAN", "MYANMAR", "KHMER"}


def _letter_script(ch: str) -> str | None:
    """The script of a letter or combining mark (a virama, a vowel sign), else None."""
    return char_script(ch) if unicodedata.category(ch)[0] in "LM" else None


def joiner_in_word(text: str, i: int) -> bool:
    """Whether the ZWNJ / ZWJ at ``text[i]`` is spelling, not an invisible-character attack:
    between two letters (or a letter and a mark) of the same joining script, or a ZWJ between
    two pictographs (an emoji sequence such as a family or a profession; version 5: an emoji
    before it may carry its presentation selector, "❤️\u200d🔥", "🏳️\u200d🌈")."""
    if text[i] not in _JOINERS or i == 0 or i + 1 >= len(text):
        return False
    j = i - 1
    if text[j] in _SELECTORS and j > 0:
        j -= 1
    prev, nxt = text[j], text[i + 1]
    if text[i] == "\u200d" and unicodedata.category(prev) in {"So", "Sk"} and unicodedata.category(nxt) == "So":
        return True
    a, b = _letter_script(text[i - 1]), _letter_script(nxt)
    return a is not None and a == b and a in _JOINING_SCRIPTS


_SELECTORS = {"\ufe0e", "\ufe0f"}  # text / emoji presentation selectors
#: left-to-right, right-to-left and Arabic letter marks: how bidirectional text is written right
_BIDI_MARKS = {"\u200e", "\u200f", "\u061c"}
_RTL_SCRIPTS = {"ARABIC", "HEBREW", "SYRIAC", "THAANA", "NKO", "SAMARITAN", "MANDAIC"}
_BIDI_REACH = 8  # characters looked through (spaces, digits, punctuation) for the nearest letter


def bidi_mark_in_rtl(text: str, i: int) -> bool:
    """Whether the directional mark at ``text[i]`` (LRM, RLM, ALM) is how right-to-left text is
    written (version 5): one mark, not a run of them, at the edge of a word (not between two
    letters or marks), whose nearest letter before or after it, within :data:`_BIDI_REACH`
    characters, is of a right-to-left script ("مرحبا\u200f 2024", "שלום\u200f!", "hello
    \u200fمرحبا"). A mark inside a word ("مر\u200fحبا", "te\u200facher") or after another
    mark is an invisible-character attack."""
    if text[i] not in _BIDI_MARKS or (i > 0 and text[i - 1] in _BIDI_MARKS):
        return False
    if 0 < i < len(text) - 1 and _letter_script(text[i - 1]) and _letter_script(text[i + 1]):
        return False

    def nearest(step: int) -> str | None:
        j = i + step
        while 0 <= j < len(text) and abs(j - i) <= _BIDI_REACH:
            if (script := _letter_script(text[j])) is not None:
                return script
            j += step
        return None

    return nearest(-1) in _RTL_SCRIPTS or nearest(1) in _RTL_SCRIPTS


#: the punctuation that has an emoji form (‼ ⁉ 〰 〽); other punctuation selects no glyph
_EMOJI_PUNCTUATION = {"\u203c", "\u2049", "\u3030", "\u303d"}


def _ideograph(ch: str) -> bool:
    return unicodedata.name(ch, "").startswith(("CJK UNIFIED IDEOGRAPH", "CJK COMPATIBILITY IDEOGRAPH"))


def selects_a_glyph(text: str, i: int) -> bool:
    """Whether the variation selector at ``text[i]`` selects a glyph of the character before it
    (version 5), one selector per character:

    * VS15 / VS16 (text or emoji style) after a symbol outside ASCII (an emoji, "©", "↔"),
      one of the four punctuation marks with an emoji form ("‼", "⁉", "〰", "〽"), or an ASCII
      digit, "#" or "*" that a keycap mark follows ("1\ufe0f\u20e3");
    * VS1-VS14 (standardized variants) after a CJK ideograph or a mathematical symbol;
    * VS17-VS256 (ideographic variation sequences) after a CJK ideograph.

    Anywhere else -- after a letter, a digit, punctuation, another selector -- it selects
    nothing and hides in the text (selectors smuggle data: one per character is a byte)."""
    if i == 0 or is_selector(text[i - 1]):
        return False
    base, o = text[i - 1], ord(text[i])
    if text[i] in _SELECTORS:
        if base.isascii():
            return base in "0123456789#*" and text[i + 1:i + 2] == "\u20e3"
        return unicodedata.category(base) in {"So", "Sk", "Sm"} or base in _EMOJI_PUNCTUATION
    if o <= 0xFE0D:
        return _ideograph(base) or unicodedata.category(base) == "Sm"
    return _ideograph(base)


def hidden_char(ch: str) -> bool:
    """A character that shows nothing and is not a space, newline or tab: format, control,
    private-use, surrogate and unassigned code points and the default-ignorable ones
    (:func:`robusteval.text.is_invisible`: variation selectors, the combining grapheme joiner,
    Hangul fillers). ``nonalnum`` counts them as invisible and ``sanitize`` removes them, both
    except a :func:`spelling_mark` (version 5: before, ``nonalnum`` missed the default-ignorable
    ones that are no format character, which ``sanitize`` removed)."""
    if ch.isascii():  # the common case, without a Unicode lookup: only control characters hide
        return not ch.isprintable() and ch not in _ALLOWED_CONTROL
    return unicodedata.category(ch) in HIDDEN_CATEGORIES or (is_invisible(ch) and not ch.isspace())


def spelling_mark(text: str, i: int) -> bool:
    """Whether the format character at ``text[i]`` is part of how the text is written, not
    hidden in it: a joiner that spells a word or an emoji sequence (:func:`joiner_in_word`), or
    a directional mark in right-to-left text (:func:`bidi_mark_in_rtl`), or a variation
    selector that selects a glyph (:func:`selects_a_glyph`: "❤️", "1️⃣", an ideographic variant)."""
    if is_selector(text[i]):
        return selects_a_glyph(text, i)
    return joiner_in_word(text, i) or bidi_mark_in_rtl(text, i)


def is_selector(ch: str) -> bool:
    """A variation selector (VS1-VS16, VS17-VS256; Mongolian free variation selectors):
    invisible, and a carrier of hidden data ("emoji smuggling") wherever it does not select a
    glyph of the character before it."""
    o = ord(ch)
    return 0xFE00 <= o <= 0xFE0F or 0xE0100 <= o <= 0xE01EF or 0x180B <= o <= 0x180D or o == 0x180F


@functools.lru_cache(maxsize=1)
def to_latin() -> dict[str, str]:
    """Cyrillic or Greek letter -> the Latin letter it looks like (Unicode TS #39,
    ``confusables.txt``; the package's ``detectors/confusables.json``)."""
    data = json.loads(resource("detectors/confusables.json").read_text(encoding="utf-8"))
    return dict(data["to_latin"])


def serbian_cyrillic(word: str) -> str | None:
    """A word of wordfreq's Serbo-Croatian list in Serbian Cyrillic ("rekao" -> "рекао"), or
    None when it has a letter outside Gaj's alphabet (a foreign word: "weekend"). Every "lj",
    "nj" and "dž" is read as one letter, also where it is two ("injekcija"); such a word only
    adds an entry no text will hold to the list of real words."""
    for latin, cyrillic in _SERBIAN_DIGRAPHS:
        word = word.replace(latin, cyrillic)
    out = word.translate(_SERBIAN)
    return out if all(char_script(c) == "CYRILLIC" for c in out) else None


def unaccented(word: str) -> str:
    """``word`` without its combining marks ("κύμα" -> "κυμα"): Greek in capitals is written
    without its accents ("ΚΥΜΑ")."""
    return unicodedata.normalize("NFC", "".join(c for c in unicodedata.normalize("NFD", word)
                                                if not unicodedata.combining(c)))


def _own_words() -> Any:
    from wordfreq import get_frequency_dict

    for langs in OWN_LANGUAGES.values():
        for lang in langs:
            yield from get_frequency_dict(lang, wordlist="best")
    for word in get_frequency_dict("sh", wordlist="best"):
        if (cyrillic := serbian_cyrillic(word)) is not None:
            yield cyrillic


def scan_lookalike_words() -> list[str]:
    """The words of the ``wordfreq`` lists of :data:`OWN_LANGUAGES` and of Serbian (in
    Cyrillic, :func:`serbian_cyrillic`), lower-cased as the lists keep them and also without
    their accents (:func:`unaccented`), that a text could show spelled only with lookalikes of
    Latin letters -- in lower case, capitalized or in capitals -- *and* that then read as a
    listed word of a Latin-script language ("а" -> "a", "со" -> "co", "ВОТ" -> "BOT", "ου" ->
    "ou", "ΚΥΜΑ" -> "KYMA", "РЕКАО" -> "PEKAO"): the only real words :func:`poses_as_word`
    could take for disguises. ``detectors/lookalike_words.json`` ships this list, so that a
    guard never loads the 230 MB of these languages' lists (it still loads the Latin-script
    ones, about 260 MB, the first time a word is not in the file: see :func:`poses_as_word`); a
    slow test checks the file against this scan."""
    table = to_latin()
    found: set[str] = set()
    for word in _own_words():
        if not word.isalpha():
            continue
        for key in {word, unaccented(word)}:
            forms = {f for f in (key, key.capitalize(), key.upper()) if all(c in table for c in f)}
            if any(known_word("".join(table[c] for c in f)) for f in forms):
                found.add(key)
    return sorted(found)


@functools.lru_cache(maxsize=1)
def real_lookalike_words() -> frozenset[str]:
    """The shipped result of :func:`scan_lookalike_words`."""
    data = json.loads(resource("detectors/lookalike_words.json").read_text(encoding="utf-8"))
    return frozenset(data["words"])


def poses_as_word(letters: str) -> bool:
    """Whether a word spelled only with Cyrillic or Greek lookalikes of Latin letters (its
    letters, ``letters``) is a disguised Latin word whatever text it stands in (version 4):
    read with :func:`to_latin` it is a word of a Latin-script language in ``wordfreq``
    ("һоԝ" -> "how", "Неӏӏо" -> "Hello"), and spelled as it is, no word of
    :data:`OWN_LANGUAGES` or Serbian ("а", "ВОТ", "ου", "ΚΥΜΑ", "РЕКАО" are words and stay
    words: :func:`real_lookalike_words`).

    Cost: a word that is not in that shipped file is looked up in the seven Latin-script
    languages' lists of :mod:`robusteval.langid`, which load once per process (about 1.7 s and
    260 MB; a guard over English text has them loaded already, for ``gec`` and ``parse_triple``;
    over Russian chat the first unlisted word, "Ахаха", loads them)."""
    table = to_latin()
    if letters.lower() in real_lookalike_words() or any(c not in table for c in letters):
        return False
    return known_word("".join(table[c] for c in letters))


def _poses(token: str) -> bool:
    """Whether a word of lookalikes poses as a Latin one, read run by run of letters: "Оо,а"
    (two Russian words without a space after the comma) is "Оо" and "а", not "Ооа"; "Х²" is
    "Х". A stress mark does not split a word ("хо́рхе" is "хорхе")."""
    runs = "".join(c if c.isalpha() else " " for c in unaccented(token)).split()
    return any(poses_as_word(run) for run in runs)


def lookalike_tokens(text: str) -> list[int]:
    """Indices (in ``text.split()``) of the words that pose as Latin ones: every letter of the
    word Cyrillic or Greek *and* a lookalike of a Latin letter (Unicode TS #39's whole-script
    confusables, read in the direction :func:`to_latin` lists), in a text that has Latin
    letters and no other Cyrillic or Greek word, or (version 4) in any text when
    :func:`poses_as_word` says so.

    Version 3's condition: a text with a real Cyrillic or Greek word ("Не так. Мне REDACTED лет.", a Russian reply
    that quotes an English name) is in that script, so its short words ("Не", "А", "О") are
    words, not disguises: version 3 returned no token there. So is a word with a Latin letter inside Russian
    ("мaма"): its other letters are Russian. Scanned over every text cell of the shared
    data (370,201: xDial's ten languages, SummEval, USR, FED and the rest), this returns a token
    for one text, FED's Russian "О, ML?" (twice: turn and dialogue files; version 4 too, over
    530,840 texts: every cell and each of its lines), whose only Cyrillic
    word is a lookalike; without the second condition it did for 9. A Latin word in Cyrillic
    text ("OK" in a Russian reply) is not looked for, since Russian text carries Latin acronyms
    honestly.

    Version 4: where that condition fails (no Latin letter, or a real Cyrillic or Greek word
    in the text), a word is still returned when :func:`poses_as_word` says it is a disguise.
    Version 3 looked away there, so one real Cyrillic word ("hello һоԝ я") turned the check
    off, and a reply made only of lookalikes ("Неӏӏо") was never read.

    Limits: an honest Greek symbol or Russian chat word in Latin text is flagged ("Spearman
    ρ = 0.5", "хаха lol"). In a text with a real Cyrillic or Greek word (or none in Latin), a
    disguise whose Latin reading is no listed word (a rare name) is not, nor is one spelled like
    a real word ("со" for "co", "ТО" for "TO"). Real words are known for Russian, Ukrainian,
    Bulgarian, Macedonian, Serbian and Greek; a word of Kazakh, Belarusian, Mongolian or
    another language wordfreq does not list that reads as a Latin word is taken for one
    (lower-case "һ", "ԁ", "ԛ", "ԝ" and "ӏ" each read as a Latin letter that is a listed word)."""
    return _script_scan(text)[1]


def _script_scan(text: str) -> tuple[int, list[int]]:
    """One pass over ``text``'s words: (how many mix Latin with Cyrillic or Greek letters, the
    indices :func:`lookalike_tokens` returns). Each letter's script is looked up once."""
    if text.isascii():  # no Cyrillic or Greek letter (most English text): nothing to read
        return 0, []
    table = to_latin()
    mixed = 0
    latin = real_foreign = False
    candidates: list[tuple[int, str]] = []
    for i, token in enumerate(text.split()):
        letters = [(c, char_script(c)) for c in token if c.isalpha()]
        scripts = {script for _, script in letters}
        mixed += len(scripts & CONFUSABLE_SCRIPTS) >= 2
        foreign = [c for c, script in letters if script in ("CYRILLIC", "GREEK")]
        if not foreign:
            latin = latin or "LATIN" in scripts
        elif any(c not in table for c in foreign):
            real_foreign = True  # a real Cyrillic or Greek word, even with a Latin letter in it: that script's text
        elif scripts <= {"CYRILLIC", "GREEK"}:
            candidates.append((i, token))
        # else: Latin mixed with lookalikes in one token, counted in ``mixed``
    if latin and not real_foreign:
        return mixed, [i for i, _ in candidates]
    return mixed, [i for i, token in candidates if _poses(token)]


def features(text: str) -> dict[str, Any]:
    """Raw character statistics of ``text``."""
    run = longest = 0
    nonalnum = nonspace = alnum = invisible = 0
    for i, ch in enumerate(text):
        if ch.isspace() and ch not in {"\u200b", "\u2060", "\ufeff"}:
            run = 0
            continue
        cat = unicodedata.category(ch)
        if hidden_char(ch):
            if spelling_mark(text, i):
                continue  # part of the text's spelling, direction or glyphs: neither invisible nor a letter
            invisible += 1
        nonspace += 1
        if ch.isalnum() or cat[0] == "M":  # combining marks (Devanagari vowel signs...) belong to letters
            alnum += 1
            run = 0
        else:
            nonalnum += 1
            run += 1
            longest = max(longest, run)
    mixed, posing = _script_scan(text)
    # the share counts two letters more than the text has: one mark after a one-character word
    # ("是。", "예.", "No." alike) is ordinary punctuation, not a string of symbols
    return {"longest_run": longest, "share": nonalnum / (nonspace + SHARE_PRIOR) if nonspace else 0.0,
            "invisible": invisible, "mixed_script_tokens": mixed, "lookalike_tokens": len(posing),
            "alnum": alnum}


@register_detector
class NonAlnum(Detector):
    """Non-alphanumeric runs, invisible characters and homoglyphs (Mu & Lim 2022, §6.2 / Table 3)."""

    name: ClassVar[str] = "nonalnum"
    family: ClassVar[str] = "surface"
    source: ClassVar[str] = "Mu & Lim 2022, Universal Evasion Attacks on Summarization Scoring, §6.2, Table 3"
    default_threshold: ClassVar[float] = 0.5
    reads: ClassVar[tuple[str, ...]] = ("response",)
    # v2: the share counts SHARE_PRIOR more letters (short CJK / Hangul replies); v3: whole-token
    # lookalikes count as homoglyphs; v4: such a word is read in any text (poses_as_word); v5: an
    # emoji ZWJ sequence after a presentation selector, directional marks at the edge of a
    # right-to-left word and variation selectors that select a glyph are writing, neither
    # invisible nor letters (spelling_mark); a selector that selects nothing (after a letter)
    # and every other hidden character sanitize removes (Mongolian selectors, the combining
    # grapheme joiner, Hangul fillers: hidden_char) count as invisible
    version: ClassVar[int] = 5

    def __init__(self, run_scale: float = 3.0, share_floor: float = 0.3, share_span: float = 0.4,
                 threshold: float | None = None) -> None:
        super().__init__(threshold)
        self.run_scale = run_scale
        self.share_floor = share_floor
        self.share_span = share_span

    def signature(self) -> str:
        return f"run_scale={self.run_scale},share_floor={self.share_floor},share_span={self.share_span}"

    def suspicion(self, f: dict[str, Any]) -> float:
        if f["alnum"] == 0 or f["invisible"] > 0:
            return 1.0
        run = squash(f["longest_run"] - 2, self.run_scale)  # runs of 1-2 (". ", '?"') are normal
        share = min(1.0, max(0.0, (f["share"] - self.share_floor) / self.share_span))
        mixed = 0.9 if f["mixed_script_tokens"] or f["lookalike_tokens"] else 0.0
        return max(run, share, mixed)

    def _analyze(self, samples: list[Sample]) -> list[dict[str, Any]]:
        rows = []
        for s in samples:
            f = features(s.response)
            rows.append({**f, "suspicion": self.suspicion(f)})
        return rows
