"""One spaCy parse per distinct text, shared by the syntax-based detectors (gec, parse_triple).

A guard running several spaCy detectors parses each text once; references repeated across
samples (SummEval's 16 systems share each document's references) are parsed once too. The
named-entity recognizer is not needed by any detector and is left out of the pipe.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

MAX_CHARS = 20_000  # longer texts are cut here before parsing (spaCy's cost grows with length)
_CACHE: OrderedDict[str, Any] = OrderedDict()
CAPACITY = 50_000


def _nlp() -> Any:
    from robusteval.nlp import load_spacy

    return load_spacy()


def parse(texts: Sequence[str], batch_size: int = 128) -> list[Any]:
    """spaCy Docs for ``texts`` (cached by text, LRU)."""
    missing = [t for t in dict.fromkeys(texts) if t not in _CACHE]
    fresh: dict[str, Any] = {}
    if missing:
        nlp = _nlp()
        disable = [p for p in ("ner",) if p in nlp.pipe_names]
        docs = nlp.pipe((t[:MAX_CHARS] for t in missing), batch_size=batch_size, disable=disable)
        fresh = dict(zip(missing, docs, strict=True))
    out = []
    for t in texts:
        if t in fresh:
            out.append(fresh[t])
        else:
            _CACHE.move_to_end(t)
            out.append(_CACHE[t])
    _CACHE.update(fresh)
    while len(_CACHE) > CAPACITY:
        _CACHE.popitem(last=False)
    return out


def clear() -> None:
    _CACHE.clear()
