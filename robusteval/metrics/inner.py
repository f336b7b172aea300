"""What a metric is made of, and which of its samples' requests failed.

A metric may wrap others: a guard or a smoothed metric its ``metric``, a committee its
``members``, a cached victim or a reward function the metric under them. :func:`inner_metrics`
walks them, so the fallback counters of a whole stack (:func:`fallback_counters`) and the
samples whose LLM request failed anywhere in it (:func:`failure_marks`) are read in one place.

Per-sample failure attribution: a judge scoring under ``on_llm_error="midpoint"`` appends the id
of every sample whose request failed to its ``failed_requests`` list (besides counting
``llm_failed``). A caller takes :func:`failure_marks` before scoring and reads
:func:`failed_since` after it: exactly the samples that got a fallback score in that call, so a
resumed score or attack log retries those rows and keeps every finished one.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from robusteval.metrics.base import Metric

#: (a metric's ``failed_requests`` list, its length when the marks were taken)
FailureMarks = list[tuple[list[str], int]]


def inner_metrics(metric: Any) -> list[Any]:
    """``metric`` and every metric it wraps, each once, outermost first: attributes that are
    :class:`Metric` objects or non-empty lists/tuples of them (a committee's members), and
    whatever object sits under a ``metric`` attribute (a guard's, a smoothed metric's, a
    :class:`~robusteval.attacks.victim.CachedVictim`'s), recursively."""
    out: list[Any] = []
    seen: set[int] = set()

    def walk(m: Any) -> None:
        if m is None or id(m) in seen:
            return
        seen.add(id(m))
        out.append(m)
        for name, value in (vars(m).items() if hasattr(m, "__dict__") else ()):
            if isinstance(value, list | tuple):
                if value and isinstance(value[0], Metric):
                    for inner in value:
                        walk(inner)
            elif isinstance(value, Metric) or (name == "metric" and hasattr(value, "score")):
                walk(value)

    walk(metric)
    return out


def fallback_counters(metric: Any) -> list[Counter[str]]:
    """The fallback counters (``fallbacks``) of ``metric`` and of every metric it wraps: a smoothed
    or guarded committee member reports its inner metric's fallbacks as its own."""
    return [c for m in inner_metrics(metric) if isinstance(c := getattr(m, "fallbacks", None), Counter)]


def fallback_total(metric: Any) -> int:
    """How many fallbacks ``metric`` and everything it wraps have counted so far: cheap enough for
    every victim batch of a search, which caches a batch only when this did not change."""
    return sum(int(v) for m in inner_metrics(metric) for v in (getattr(m, "fallbacks", None) or {}).values())


def failure_marks(*metrics: Any) -> FailureMarks:
    """Where every ``failed_requests`` list in the stacks of ``metrics`` ends now (see the module
    doc); a metric two stacks share (a victim that is also the gold) is marked once."""
    logs = {id(log): log for metric in metrics for m in inner_metrics(metric)
            if isinstance(log := getattr(m, "failed_requests", None), list)}
    return [(log, len(log)) for log in logs.values()]


def failed_since(marks: FailureMarks) -> Counter[str]:
    """Per sample id, how many failed requests were recorded after ``marks`` were taken."""
    return Counter(i for log, n in marks for i in log[n:])


def forget_failures(marks: FailureMarks) -> None:
    """Drop what was recorded after ``marks``: failures of work that is not the scored samples'
    (a committee's calibration set, whose ids may be the same as theirs)."""
    for log, n in marks:
        del log[n:]
