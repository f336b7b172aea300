"""The Detector contract (DESIGN.md): ``detect(samples) -> ndarray`` of suspicion in [0, 1]
plus a ``threshold``; a sample is flagged when its suspicion is at or above the threshold.

Thresholds are never hard-coded into decisions: every detector ships a documented default,
and ``robusteval guard calibrate`` replaces it with one fitted on clean, human-written text
to a target false-positive rate (saved as JSON, loaded with ``thresholds=``).

Shared behaviour lives here so every detector treats odd input the same way: a text that is
not valid Unicode (a lone surrogate) in any field is an :class:`InputError` naming the sample
and the field; an empty or blank response (whitespace or invisible characters only, see
:func:`robusteval.text.is_blank`) gets suspicion 1.0 (there is nothing to evaluate; a sound
metric should not reward it) and is *counted* in :meth:`Detector.report`; NaN is an error;
values are clipped to [0, 1].

Each detector remembers its last 100,000 analyses, so text scored again (an original under a
second variant, a search attack's repeated candidate) is not analyzed twice. The memo key is
the tuple of the Sample fields the detector declares in ``reads`` (default: every field a
detector may read: task, response, context, reference(s), fact, answer); a detector that
reads fewer fields declares them, and a test checks each declaration by varying the others.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections import Counter, OrderedDict
from collections.abc import Hashable, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from robusteval.errors import DataFormatError, RobustevalError
from robusteval.registry import Registry, subclass_adapter
from robusteval.text import check_sample_text, is_blank
from robusteval.types import Sample

MEMO_FIELDS = ("task", "response", "context", "reference", "references", "fact", "answer")


def _detector_info(cls: Any) -> dict[str, Any]:
    """The registry info of a Detector class; refuses a ``reads`` that names no Sample field."""
    unknown = set(cls.reads) - set(MEMO_FIELDS)
    if unknown or "response" not in cls.reads:
        raise TypeError(f"detector {cls.name}: reads must name Sample fields among {MEMO_FIELDS} "
                        f"and include 'response' (got {cls.reads})")
    return {"family": cls.family, "source": cls.source,
            "default_threshold": cls.default_threshold, "needs": list(cls.needs)}


DETECTORS: Registry[Any] = Registry("detector", group="robusteval.detectors", adapt=subclass_adapter(
    lambda: Detector, _detector_info, "a Detector subclass (robusteval.detectors.Detector)"))


def register_detector(cls: type) -> type:
    """Register a Detector subclass under its ``name`` with its metadata."""
    DETECTORS.register(cls.name, **_detector_info(cls))(cls)  # type: ignore[attr-defined]
    return cls


#: why a detector may be listed once, and how to run one twice with other settings: a subclass
#: named apart, which a config lists as ``module:Class`` (docs/plugins.md)
ONCE = ("each detector may be listed once (its thresholds, suspicions and flags are keyed by its name); to "
        "run one twice with other settings, subclass it with a `name` of its own and list the subclass as "
        "module:Class (docs/plugins.md)")


def check_unique(detectors: Sequence[Detector]) -> None:
    """Refuse two detectors of one name: every table (thresholds, suspicions, flags, the FPR
    split over k detectors) is keyed by the name, so the second would overwrite the first's
    entries while still counting in k and flagging in the guard."""
    seen: Counter[str] = Counter(d.name for d in detectors)
    twice = sorted(name for name, n in seen.items() if n > 1)
    if twice:
        raise RobustevalError(f"detector {twice[0]!r} is listed {seen[twice[0]]} times: {ONCE}")


class Detector(ABC):
    """Base class: subclasses set the class attributes and implement :meth:`_analyze`."""

    name: ClassVar[str] = "detector"
    family: ClassVar[str] = ""
    source: ClassVar[str] = ""
    default_threshold: ClassVar[float] = 0.5
    needs: ClassVar[tuple[str, ...]] = ()  # what the sample must carry besides the response
    reads: ClassVar[tuple[str, ...]] = MEMO_FIELDS  # Sample fields _analyze may read (memo key)
    # bumped when what the detector computes changes while its settings (signature) do not, so
    # thresholds calibrated before stop applying (:meth:`identity`)
    version: ClassVar[int] = 1
    #: marks a detector to code that must not import this module (robusteval.metrics.inner):
    #: its own fallbacks (an abstention on a language it does not read) are deterministic
    #: answers, not a failed request of a metric
    is_detector: ClassVar[bool] = True

    def __init__(self, threshold: float | None = None) -> None:
        self.threshold = float(self.default_threshold if threshold is None else threshold)
        self.threshold_source = "default" if threshold is None else "argument"
        self.fallbacks: Counter[str] = Counter()
        self._memo: OrderedDict[Hashable, dict[str, Any]] = OrderedDict()
        self.memo_hits = 0

    MEMO_SIZE: ClassVar[int] = 100_000

    def _memo_key(self, s: Sample) -> Hashable:
        """Everything this detector reads from ``s`` (its ``reads``), and the language the sample
        declares (``meta["language"]``: detectors that support some languages abstain on the
        others): equal keys, equal answers."""
        return (*(getattr(s, f) for f in self.reads), (s.meta or {}).get("language"))

    def input_digest(self, s: Sample) -> str:
        """A short hash of everything this detector reads from ``s`` (its memo key): what a
        saved suspicion is keyed by, so two samples that share an id and a response but not a
        context, a reference or a declared language never share one."""
        import hashlib
        import json

        text = json.dumps(self._memo_key(s), ensure_ascii=False, default=str)
        return hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]

    # -- public API ---------------------------------------------------------------------
    def analyze(self, samples: Sequence[Sample]) -> list[dict[str, Any]]:
        """Per sample: ``suspicion`` in [0, 1] plus the raw features behind it."""
        samples = list(samples)
        out: list[dict[str, Any] | None] = [None] * len(samples)
        todo: dict[Hashable, list[int]] = {}
        for i, s in enumerate(samples):
            check_sample_text(s)
            if is_blank(s.response):
                self.fallbacks["empty_response"] += 1
                out[i] = {"suspicion": 1.0, "empty": True}
                continue
            key = self._memo_key(s)
            if key in self._memo:
                self._memo.move_to_end(key)
                out[i] = dict(self._memo[key])
                self.memo_hits += 1
            else:
                todo.setdefault(key, []).append(i)
        if todo:
            first = [idx[0] for idx in todo.values()]
            rows = self._analyze([samples[i] for i in first])
            if len(rows) != len(first):
                raise RobustevalError(f"detector {self.name} returned {len(rows)} rows for {len(first)} samples")
            for (key, idx), row in zip(todo.items(), rows, strict=True):
                s = float(row["suspicion"])
                if not np.isfinite(s):
                    raise RobustevalError(f"detector {self.name} produced a non-finite suspicion "
                                          f"for sample {samples[idx[0]].id!r}")
                row["suspicion"] = min(1.0, max(0.0, s))
                if not row.get("llm_failed"):  # a row over a failed request is asked again next time
                    self._memo[key] = row
                for i in idx:
                    out[i] = dict(row)
            while len(self._memo) > self.MEMO_SIZE:
                self._memo.popitem(last=False)
        rows_out = [r for r in out if r is not None]
        for r in rows_out:  # a reported fallback (an abstention...) counts once per sample, memo hit or not
            if r.get("fallback"):
                self.fallbacks[str(r["fallback"])] += 1
        return rows_out

    def pending(self, samples: Sequence[Sample]) -> list[Sample]:
        """The samples :meth:`analyze` would pass to :meth:`_analyze` now: one per memo key, not
        blank, not memoized."""
        keys: dict[Hashable, Sample] = {}
        for s in samples:
            if not is_blank(s.response):
                key = self._memo_key(s)
                if key not in self._memo:
                    keys.setdefault(key, s)
        return list(keys.values())

    def parse_requests(self, samples: Sequence[Sample]) -> list[tuple[str, bool]]:
        """The texts :meth:`_analyze` parses with spaCy (:mod:`robusteval.detectors.parsing`)
        for ``samples``, each with whether it needs named entities. A guard parses them in a
        helper process while its metric scores (:func:`parsing.prefetched`). None by default."""
        return []

    def detect(self, samples: Sequence[Sample]) -> np.ndarray:
        """Suspicion in [0, 1], one float per sample."""
        return np.array([r["suspicion"] for r in self.analyze(samples)], dtype=np.float64)

    def thresholds(self, samples: Sequence[Sample]) -> np.ndarray:
        """The threshold for each sample: the one given or calibrated, else the shipped default
        of the sample's task and language (:mod:`robusteval.detectors.defaults`)."""
        from robusteval.detectors.defaults import thresholds

        return thresholds(self, list(samples))

    def flags(self, samples: Sequence[Sample]) -> np.ndarray:
        """True where suspicion >= the sample's threshold (:meth:`thresholds`)."""
        samples = list(samples)
        return self.detect(samples) >= self.thresholds(samples)

    def signature(self) -> str:
        """Settings that change the suspicion values (a calibrated threshold is tied to them)."""
        return ""

    def identity(self) -> str:
        """What a calibrated threshold is tied to: the :attr:`version` of what the detector
        computes and its :meth:`signature` (settings). Every threshold table -- the shipped
        defaults, a thresholds file, a joint guard -- stores and matches this, so bumping
        ``version`` retires thresholds calibrated before a change that left the settings alone.
        Version 1 adds nothing (the signature as it always was)."""
        return self.signature() if self.version == 1 else f"v{self.version}|{self.signature()}"

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "family": self.family, "threshold": self.threshold,
                "threshold_source": self.threshold_source, "signature": self.identity()}

    def report(self) -> dict[str, Any]:
        return {**self.describe(), "fallbacks": dict(self.fallbacks)}

    # -- to implement -------------------------------------------------------------------
    @abstractmethod
    def _analyze(self, samples: list[Sample]) -> list[dict[str, Any]]:
        """Rows with at least ``suspicion`` for non-empty responses."""


def squash(x: float, scale: float) -> float:
    """Map x >= 0 to [0, 1) monotonically: 1 - exp(-x / scale)."""
    return float(1.0 - np.exp(-max(0.0, x) / scale))


# -- calibrated thresholds file ------------------------------------------------------------
def _thresholds_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A thresholds file written by ``robusteval guard calibrate``, checked."""
    from robusteval.results import read_json

    p = Path(path)
    data = read_json(p, "thresholds file not found (write one with `robusteval guard calibrate`)")
    table = data.get("detectors") if isinstance(data, dict) else None
    if not isinstance(table, dict):
        raise DataFormatError(p, "no 'detectors' table; is this a `robusteval guard calibrate` output?")
    for name, entry in table.items():
        if not isinstance(entry, dict) or not isinstance(entry.get("threshold"), int | float):
            raise DataFormatError(p, f"detector {name!r} has no numeric 'threshold'", field=name)
    return dict(data)


def read_thresholds(path: str | os.PathLike[str]) -> dict[str, dict[str, Any]]:
    """The ``detectors`` table of a thresholds file written by ``robusteval guard calibrate``."""
    return dict(_thresholds_file(path)["detectors"])


def read_thresholds_header(path: str | os.PathLike[str]) -> dict[str, Any]:
    """How a thresholds file was calibrated: everything in it but the ``detectors`` table
    (``target_fpr``, ``combined``, ``per_detector_fpr``, ``confidence``, ``clean_sets``, ``clean_split``,
    ``provenance``)."""
    return {k: v for k, v in _thresholds_file(path).items() if k != "detectors"}


def apply_thresholds(detector: Detector, table: dict[str, dict[str, Any]], path: str | os.PathLike[str]) -> None:
    """Set ``detector.threshold`` from a calibrated table; refuse a threshold calibrated
    for different detector settings."""
    entry = table.get(detector.name)
    if entry is None:
        return
    sig = entry.get("signature", "")
    if sig != detector.identity():
        raise RobustevalError(f"threshold for {detector.name} in {path} was calibrated with settings "
                              f"{sig!r}, but the detector runs with {detector.identity()!r}; recalibrate")
    detector.threshold = float(entry["threshold"])
    detector.threshold_source = f"calibrated ({path})"
