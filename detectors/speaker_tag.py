"""[speaker_tag] Role / speaker prefixes in a response.

Vasselli & Watanabe (Table 2) show that prefixing a response with "teacher:", "agent:" or
"user:" moves reference-free dialogue metrics (DialogRPT most: it was trained on Reddit
threads where such labels mark quoted turns). A known role label followed by a colon at the
start of the response (or of any line) gives suspicion 1.0 (after an ASCII colon or any of its
lookalikes, e.g. the full-width "："); an unknown one- or two-word
label in the same position ("Bob:", "Speaker 1:", ASCII colon only) 0.7; a known role label after a sentence
end inside the text ("... . user: ...") 0.8. A line starts after any line break, and a label with its
colon stays on one line (version 2: version 1 read "x\nuser: hi" as the unknown label "x user", 0.7).
Role names live in package data (``resources/detectors/speaker_tags.json``).
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any, ClassVar

from robusteval.detectors.base import Detector, register_detector

from robusteval.paths import resource
from robusteval.types import Sample

# a line starts after any line break ``str.splitlines`` knows, not only "\n" (MULTILINE's ``^``);
# spaces inside a label and between it and its colon stay on one line (version 2): with ``\s``
# there, "x\nuser: hi" read as the unknown two-word label "x user" (0.7), hiding the role label
# that starts the second line, and ``sanitize`` kept it
LINE_BREAKS = r"\n\r\x0b\x0c\x1c-\x1e\x85\u2028\u2029"
_LINE_START = rf"(?:^|(?<=[{LINE_BREAKS}]))"
_SP = rf"[^\S{LINE_BREAKS}]"
_LABEL = rf"[^\W\d_][\w'.-]{{0,19}}(?:{_SP}+\d{{1,2}}|{_SP}+[^\W\d_][\w'-]{{0,14}})?"
# the ASCII colon and its lookalikes (Unicode TS #39 confusables of ":"; the full-width one is
# how Chinese and Japanese write a label): a known role label before any of them is a tag (a
# guard-aware attack writes "teacher：" to slip past an ASCII-only pattern), an unknown label
# only before the ASCII one, so CJK prose with a full-width colon is not read as a speaker tag
COLONS = ":\uff1a\ufe55\ufe13\u2236\ua789\u0589\u02d0"
ROLE_PREFIX = re.compile(
    rf"{_LINE_START}{_SP}*[\[(<]?{_SP}*({_LABEL}){_SP}*[\])>]?{_SP}*([{COLONS}])(?!//)", re.UNICODE | re.MULTILINE
)
_INLINE = re.compile(r"[.!?]\s+([^\W\d_][\w'-]{0,19})\s*:\s", re.UNICODE)


@functools.lru_cache(maxsize=1)
def roles() -> frozenset[str]:
    return frozenset(json.loads(resource("detectors/speaker_tags.json").read_text(encoding="utf-8"))["roles"])


def tag_score(text: str) -> tuple[float, str | None]:
    known = roles()
    best, found = 0.0, None
    for m in ROLE_PREFIX.finditer(text):
        label = m.group(1).strip()
        first = label.split()[0].lower()
        is_role = label.lower() in known or first in known
        if not is_role and m.group(2) != ":":
            continue
        score = 1.0 if is_role else 0.7
        if score > best:
            best, found = score, label
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
    version: ClassVar[int] = 2
    reads: ClassVar[tuple[str, ...]] = ("response",)

    def _analyze(self, samples: list[Sample]) -> list[dict[str, Any]]:
        rows = []
        for s in samples:
            score, label = tag_score(s.response)
            rows.append({"tag": label, "suspicion": score})
        return rows
