"""One spaCy parse per distinct text, shared by the syntax-based detectors (gec, parse_triple).

A guard running several spaCy detectors parses each text once; references repeated across
samples (SummEval's 16 systems share each document's references) are parsed once too. The
named-entity recognizer is not needed by any detector and is left out of the pipe unless
asked for.

**Two cores, one helper.** A large batch is split between this process and one forked helper
process: the helper parses its share and sends the Docs back as one spaCy ``DocBin``, this
process parses the rest meanwhile and then reads the helper's Docs. spaCy's own ``n_process=2`` starts two helpers
and has this process read *every* Doc back, so on 2 cores the reading competes with both
helpers: on 1,661 SummEval texts (with BERTScore loaded, caches cold) it took 4.45 s, against
5.89 s in one process and 3.85 s split here, where only the helper's share is serialized (then
about 0.45 ms a Doc each way with ``Doc.to_bytes``; since 2026-11-26 one ``DocBin``, about
0.25 ms a Doc to pack and 0.1 ms to read). The helper is forked, so it starts with the loaded pipeline and costs
no model load; where forking is not available (not Linux) or not allowed (inside a daemonic
process), everything is parsed here, with the same result.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import signal
import sys
import time
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

log = logging.getLogger(__name__)

MAX_CHARS = 20_000  # longer texts are cut here before parsing (spaCy's cost grows with length)
PARALLEL_FROM = 256  # texts; below this, starting a helper process costs more than it saves
HELPER_SHARE = 0.5  # of the texts, parsed by the helper (it also serializes, this process reads)
_CACHE: OrderedDict[str, Any] = OrderedDict()
CAPACITY = 50_000


def _nlp() -> Any:
    from robusteval.nlp import load_spacy

    return load_spacy()


def _disabled(nlp: Any, ner: bool) -> list[str]:
    return [] if ner else [p for p in ("ner",) if p in nlp.pipe_names]


def _pipe(texts: Sequence[str], ner: bool, batch_size: int) -> list[Any]:
    nlp = _nlp()
    return list(nlp.pipe([t[:MAX_CHARS] for t in texts], batch_size=batch_size, disable=_disabled(nlp, ner)))


# what a Doc keeps on its way back from the helper: every token annotation a detector reads
# (and the whitespace); the sentences follow from HEAD and DEP
DOC_ATTRS = ("ORTH", "NORM", "LEMMA", "TAG", "POS", "MORPH", "HEAD", "DEP", "ENT_IOB", "ENT_TYPE", "ENT_KB_ID",
             "ENT_ID")


def _parse_to_bytes(texts: list[str], ner: bool, batch_size: int) -> bytes:
    """In the helper: the Docs as one spaCy ``DocBin`` (the token annotations as arrays, one
    string table), without the token vectors no detector reads. One DocBin is far cheaper on
    both sides than a ``Doc.to_bytes`` per Doc, each of which carries its own string table and
    costs a msgpack call (srsly scans the installed packages' entry points on each): on 900
    SummEval texts 0.23 s to pack and 0.1 s to read, against 0.68 s and 0.60 s (BENCHMARKS
    §10), with the same annotations (``tests/test_parsing.py`` compares them)."""
    from spacy.tokens import DocBin

    docs = DocBin(attrs=list(DOC_ATTRS), store_user_data=False)
    for d in _pipe(texts, ner, batch_size):
        docs.add(d)
    return bytes(docs.to_bytes())


def _docs_from_bytes(payload: bytes) -> list[Any]:
    """The Docs of :func:`_parse_to_bytes`, on this process's vocabulary."""
    from spacy.tokens import DocBin

    return list(DocBin().from_bytes(payload).get_docs(_nlp().vocab))


def _serve(conn: Any, jobs: list[tuple[list[str], bool]], batch_size: int) -> None:
    """The helper process: parse each job and send its Docs' bytes (or the error's text)."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # not the parent's handlers: stop means stop
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    try:
        # every job parsed before the first is sent: a send blocks until the parent reads, which
        # for prefetch is after the metric has scored
        done = [_parse_to_bytes(texts, ner, batch_size) for texts, ner in jobs]
        for payload in done:
            conn.send(("ok", payload))
    except BaseException as e:  # reported to the parent, which parses those texts itself
        conn.send(("error", f"{type(e).__name__}: {e}"))
    finally:
        conn.close()


def helper_available() -> bool:
    """Whether a helper process can be forked here: Linux, at least 2 usable cores, and not
    inside a daemonic process (which may not have children)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return sys.platform == "linux" and cores >= 2 and not multiprocessing.current_process().daemon


class _Helper:
    """One forked process parsing ``jobs`` ((texts, ner) pairs) in order; :meth:`results` takes
    each job's Docs, or None for a job the helper did not deliver (it failed, died or hung past
    the deadline: then it is stopped and the caller parses those texts itself)."""

    SECONDS_PER_TEXT = 0.2  # the deadline: generous (a text takes ~4 ms) ...
    GRACE = 60.0  # ... plus a minute
    SETTLE = 10.0  # s the caller still waits when it comes for the results after the deadline
    jobs: list[tuple[list[str], bool]]

    def __init__(self, jobs: list[tuple[list[str], bool]], batch_size: int) -> None:
        ctx = multiprocessing.get_context("fork")
        self.jobs = jobs
        self.conn, child = ctx.Pipe(duplex=False)
        self.proc = ctx.Process(target=_serve, args=(child, jobs, batch_size), daemon=True)
        self.proc.start()
        child.close()
        self.deadline = time.monotonic() + self.GRACE + self.SECONDS_PER_TEXT * sum(len(t) for t, _ in jobs)

    def results(self) -> list[list[Any] | None]:
        out: list[list[Any] | None] = []
        failure = ""
        # a helper that finished while the caller was busy sends at once: a few seconds more
        self.deadline = max(self.deadline, time.monotonic() + self.SETTLE)
        for _ in self.jobs:
            if not failure:
                try:
                    if not self.conn.poll(max(0.0, self.deadline - time.monotonic())):
                        failure = "it did not finish in time"
                    else:
                        status, payload = self.conn.recv()
                        if status == "ok":
                            out.append(_docs_from_bytes(payload))
                            continue
                        failure = payload
                except (EOFError, OSError) as e:  # it died (out of memory...)
                    failure = f"it stopped ({type(e).__name__})"
            out.append(None)
        if failure:
            log.warning("spaCy helper process failed (%s); its texts are parsed here", failure)
        self.stop()
        return out

    def stop(self) -> None:
        self.conn.close()
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join()


def _parse_split(texts: list[str], ner: bool, batch_size: int) -> list[Any]:
    if len(texts) < PARALLEL_FROM or not helper_available():
        return _pipe(texts, ner, batch_size)
    cut = len(texts) - int(len(texts) * HELPER_SHARE)
    helper = _Helper([(texts[cut:], ner)], batch_size)
    try:
        mine = _pipe(texts[:cut], ner, batch_size)
    except BaseException:
        helper.stop()
        raise
    theirs = helper.results()[0]
    return mine + (theirs if theirs is not None else _pipe(texts[cut:], ner, batch_size))


def _missing(texts: Iterable[str], ner: bool) -> list[str]:
    return [t for t in dict.fromkeys(texts) if t not in _CACHE or (ner and not _CACHE[t][1])]


def _store(fresh: dict[str, tuple[Any, bool]]) -> None:
    _CACHE.update(fresh)
    while len(_CACHE) > CAPACITY:
        _CACHE.popitem(last=False)


@contextlib.contextmanager
def prefetched(requests: Iterable[tuple[str, bool]], batch_size: int = 64) -> Iterator[int]:
    """Parse ``requests`` ((text, with named entities?) pairs) in a forked helper process while
    the body runs, and put the Docs in the cache when it ends; yields how many texts the helper
    parses. A guard scores its metric in the body, so on 2 cores the parsing fills the cycles
    the metric leaves (BENCHMARKS §10). Fewer than :data:`PARALLEL_FROM` missing texts, or no
    helper available: nothing happens here and the detectors parse as usual. A helper that
    fails costs nothing but the time: its texts are parsed later, when a detector asks."""
    wanted: dict[str, bool] = {}
    for text, ner in requests:
        wanted[text] = wanted.get(text, False) or ner
    groups = {ner: _missing((t for t, n in wanted.items() if n == ner), ner) for ner in (False, True)}
    jobs = [(texts, ner) for ner, texts in groups.items() if texts]
    count = sum(len(t) for t, _ in jobs)
    if count < PARALLEL_FROM or not helper_available():
        yield 0
        return
    helper = _Helper(jobs, batch_size)
    try:
        yield count
    except BaseException:  # the body failed: stop the helper at once, keep nothing
        helper.stop()
        raise
    for (texts, ner), docs in zip(jobs, helper.results(), strict=True):
        if docs is not None:
            _store({t: (d, ner) for t, d in zip(texts, docs, strict=True)})


def parse(texts: Sequence[str], batch_size: int = 64, ner: bool = False) -> list[Any]:
    """spaCy Docs for ``texts`` (cached by text, LRU), with named entities when ``ner``. A large
    batch is split with one helper process (see the module)."""
    missing = _missing(texts, ner)
    fresh: dict[str, tuple[Any, bool]] = {}
    if missing:
        docs = _parse_split(missing, ner, batch_size)
        fresh = {t: (d, ner) for t, d in zip(missing, docs, strict=True)}
    out = []
    for t in texts:
        if t in fresh:
            out.append(fresh[t][0])
        else:
            _CACHE.move_to_end(t)
            out.append(_CACHE[t][0])
    _store(fresh)
    return out


def clear() -> None:
    _CACHE.clear()
