"""[speaker_tag] Role / speaker prefixes in a response.

Vasselli & Watanabe (Table 2) show that prefixing a response with "teacher:", "agent:" or
"user:" moves reference-free dialogue metrics (DialogRPT most: it was trained on Reddit
threads where such labels mark quoted turns). A known role label followed by a colon at the
start of the response (or of any line) gives suspicion 1.0 (after an ASCII colon or any of its
lookalikes, e.g. the full-width "："); an unknown one- or two-word
label in the same position ("Bob:", "Dr Smith:", ASCII colon only) 0.7; a known role label after a sentence
end inside the text ("... . user: ...") 0.8. A label is a known role when it is a role name or a role name
and a number or a letter ("Speaker 1", "User B"; not "A note" or "You know").

Version 2 reads line by line: a line starts after any line break, a label stays on one line,
and only a known role's colon may stand on the next line (version 1 read "x\nuser: hi" as the
unknown label "x user", 0.7, and took any two words that began with a role name for a role).
Version 3 reads no clock time or ratio as a label ("At 3:30": version 2 read the unknown label
"At 3") and looks roles up in NFKC, so a role in full-width letters ("ｔｅａｃｈｅｒ：") is known.
Role names live in package data (``resources/detectors/speaker_tags.json``).
"""

from __future__ import annotations

import functools
import json
import unicodedata
from typing import Any, ClassVar

import regex
from robusteval.detectors.base import Detector, register_detector

from robusteval.paths import resource
from robusteval.types import Sample

# Version 2 reads the text line by line:
# - a line starts after any line break ``str.splitlines`` knows, not only "\n" (MULTILINE's ``^``);
# - the spaces inside a label stay on one line: version 1's ``\s`` there read "x\nuser: hi" as the
#   unknown two-word label "x user" (0.7), hid the role label that starts the second line, and
#   ``sanitize`` kept it; between a label and its colon a break is allowed for a known role
#   only ("user\n: hi" is a tag; "word\n: x" is no label);
# - a label may hold combining marks (Devanagari and Arabic vowel signs, which ``\w`` leaves out)
#   and invisible format characters, and follow them ("\u200fuser:"), and a sentence may end in
#   "。！？";
# - a two-word label is a role when its first word is one *and* the second is a number or a
#   letter ("Speaker 1", "User B"), not whenever its first word is ("A note:", "You know:").
# The optional brackets are matched with the spaces after them, so no two runs of spaces can
# share a stretch of the text (version 1 took seconds on a thousand spaces around a label).
LINE_BREAKS = r"\n\r\x0b\x0c\x1c-\x1e\x85\u2028\u2029"
_LINE_START = rf"(?:^|(?<=[{LINE_BREAKS}]))"
_SP = rf"(?:[^\S{LINE_BREAKS}]|\p{{Cf}})"
# a label's letters may carry marks and invisible format characters ("t\u200beacher"), which
# the role lookup drops; so may the gap before its colon ("teacher\u200b:")
_WORD = r"[^\W\d_][\w\p{M}\p{Cf}'.-]{0,19}"
_LABEL = rf"{_WORD}(?:{_SP}+\d{{1,2}}|{_SP}+[^\W\d_][\w\p{{M}}\p{{Cf}}'-]{{0,14}})?"
# the ASCII colon and its lookalikes (Unicode TS #39 confusables of ":"; the full-width one is
# how Chinese and Japanese write a label): a known role label before any of them is a tag (a
# guard-aware attack writes "teacher：" to slip past an ASCII-only pattern), an unknown label
# only before the ASCII one, so CJK prose with a full-width colon is not read as a speaker tag
COLONS = ":\uff1a\ufe55\ufe13\u2236\ua789\u0589\u02d0"
_GAP = r"(?:\s|\p{Cf})*"
ROLE_PREFIX = regex.compile(
    rf"{_LINE_START}{_SP}*(?:[\[(<]{_SP}*)?(?P<label>{_LABEL})(?P<gap>{_GAP}(?:[\])>]{_GAP})?)"
    rf"(?P<colon>[{COLONS}])(?!//)",
    regex.MULTILINE | regex.VERSION0,
)
_INLINE = regex.compile(r"(?:[.!?]\s+|[。！？]\s*)([^\W\d_][\w\p{M}'-]{0,19})\s*:\s", regex.VERSION0)
_BREAK = regex.compile(rf"[{LINE_BREAKS}]")


@functools.lru_cache(maxsize=1)
def roles() -> frozenset[str]:
    return frozenset(json.loads(resource("detectors/speaker_tags.json").read_text(encoding="utf-8"))["roles"])


def is_role(label: str) -> bool:
    """A known role label: one of the package's role names ("teacher", "A"), or such a name
    and a number or a letter ("Speaker 1", "User B")."""
    known = roles()
    # NFKC: a role in full-width letters ("ｔｅａｃｈｅｒ") is the role (version 3)
    plain = unicodedata.normalize("NFKC", "".join(c for c in label if unicodedata.category(c) != "Cf"))
    words = plain.lower().split()
    if not words:
        return False
    if " ".join(words) in known:
        return True
    return len(words) == 2 and words[0] in known and (words[1].isdigit() or len(words[1]) == 1)


def tag_label(m: regex.Match[str]) -> tuple[str, float] | None:
    """What a :data:`ROLE_PREFIX` match is: the label and its suspicion (1.0 a known role, 0.7
    an unknown label before an ASCII colon on the same line), or None (no tag). Version 3: an
    unknown label that ends in a digit before a digit ("At 3:30") is a time, not a label.

    A limit: a run of an unsegmented script is one word of up to 20 characters here, so a
    Chinese clause before an ASCII colon ("我的意思是: 不行") reads as an unknown label (0.7),
    where the English one ("My point is: no", three words) does not. Estimating its words would
    drop real labels as often ("アシスタント:", "人工智能助手:" are as long), so it is left so."""
    label = m.group("label").strip()
    if is_role(label):
        return label, 1.0
    if m.group("colon") != ":" or _BREAK.search(m.group("gap")):
        return None
    after = m.string[m.end():m.end() + 1]
    if label[-1:].isdigit() and after.isdigit():  # a clock time or a ratio: "At 3:30", "明天下午3:30见"
        return None
    return label, 0.7


def tag_score(text: str) -> tuple[float, str | None]:
    known = roles()
    best, found = 0.0, None
    for m in ROLE_PREFIX.finditer(text):
        tagged = tag_label(m)
        if tagged is not None and tagged[1] > best:
            found, best = tagged
    for m in _INLINE.finditer(text):
        if m.group(1).lower() in known and best < 0.8:
            best, found = 0.8, m.group(1)
    return best, found


@register_detector
class SpeakerTag(Detector):
    """Role and speaker labels prefixed to a response (Vasselli & Watanabe, Table 2)."""

    name: ClassVar[str] = "speaker_tag"
    family: ClassVar[str] = "dialogue"
    source: ClassVar[str] = "Vasselli & Watanabe, Adversarial Evaluation of Dialogue System Metrics, Table 2"
    default_threshold: ClassVar[float] = 0.7
    # 3: clock times are no labels; roles are read in NFKC (full-width letters)
    version: ClassVar[int] = 3
    reads: ClassVar[tuple[str, ...]] = ("response",)

    def _analyze(self, samples: list[Sample]) -> list[dict[str, Any]]:
        rows = []
        for s in samples:
            score, label = tag_score(s.response)
            rows.append({"tag": label, "suspicion": score})
        return rows
