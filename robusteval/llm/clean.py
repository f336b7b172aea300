"""Cleaning of LLM generations into one candidate text (AdvEval candidates, aspect rewrites)."""

from __future__ import annotations

import re


def clean_candidate(text: str) -> str:
    """First non-empty line of a generation, without list markers, labels or quotes."""
    marker = re.compile(r"^\s*(?:\d+[.)]|[-*•]|(?:response|summary|question|text|rewritten)\s*:)\s*", re.IGNORECASE)
    for line in text.splitlines():
        previous = None
        while previous != line:
            previous, line = line, marker.sub("", line).strip().strip('"').strip()
        if line:
            return line
    return ""
