"""One spaCy parse per distinct text, shared by the syntax-based detectors (gec, parse_triple).

A guard running several spaCy detectors parses each text once; references repeated across
samples (SummEval's 16 systems share each document's references) are parsed once too. The
named-entity recognizer is not needed by any detector and is left out of the pipe.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

MAX_CHARS = 20_000  # longer texts are cut here before parsing (spaCy's cost grows with length)
PARALLEL_FROM = 256  # texts; below this, starting worker processes costs more than it saves
_CACHE: OrderedDict[str, Any] = OrderedDict()
CAPACITY = 50_000


def _nlp() -> Any:
    from robusteval.nlp import load_spacy

    return load_spacy()


def parse(texts: Sequence[str], batch_size: int = 64, ner: bool = False) -> list[Any]:
    """spaCy Docs for ``texts`` (cached by text, LRU), with named entities when ``ner``. Large
    batches are parsed by one worker process per CPU core (up to 2; spaCy's ``n_process``): on
    2 cores that nearly halves the wall time of parsing 1,000 summaries."""
    missing = [t for t in dict.fromkeys(texts) if t not in _CACHE or (ner and not _CACHE[t][1])]
    fresh: dict[str, tuple[Any, bool]] = {}
    if missing:
        nlp = _nlp()
        disable = [] if ner else [p for p in ("ner",) if p in nlp.pipe_names]
        workers = min(2, os.cpu_count() or 1) if len(missing) >= PARALLEL_FROM else 1
        docs = nlp.pipe([t[:MAX_CHARS] for t in missing], batch_size=batch_size, disable=disable, n_process=workers)
        fresh = {t: (d, ner) for t, d in zip(missing, docs, strict=True)}
    out = []
    for t in texts:
        if t in fresh:
            out.append(fresh[t][0])
        else:
            _CACHE.move_to_end(t)
            out.append(_CACHE[t][0])
    _CACHE.update(fresh)
    while len(_CACHE) > CAPACITY:
        _CACHE.popitem(last=False)
    return out


def clear() -> None:
    _CACHE.clear()
