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


#: a list attribute longer than this holds data (samples, scores), not the parts of a metric
MAX_PARTS = 64


def _part(value: Any) -> bool:
    """Whether ``value`` may hold a metric: a :class:`Metric`, anything that scores (a committee
    member given as a plain object, a cached victim) or a detector (``analyze``: a guard's
    committee detector holds a committee of judges)."""
    return isinstance(value, Metric) or callable(getattr(value, "score", None)) or \
        callable(getattr(value, "analyze", None))


def inner_metrics(metric: Any) -> list[Any]:
    """``metric`` and everything it is made of, each once, outermost first: attributes (and
    elements of short lists/tuples, such as a committee's members or a guard's detectors) that
    are metrics, other scorers or detectors, recursively -- a guard's or a smoothed metric's
    ``metric``, a :class:`~robusteval.attacks.victim.CachedVictim`'s, a committee detector's
    ``committee``, the values of a short dict (an attack's judges per task)."""
    out: list[Any] = []
    seen: set[int] = set()

    def walk(m: Any) -> None:
        if id(m) in seen:
            return
        seen.add(id(m))
        out.append(m)
        for value in (vars(m).values() if hasattr(m, "__dict__") else ()):
            if isinstance(value, list | tuple | dict):  # a dict's values: AdvEval's gold judge per task
                if len(value) <= MAX_PARTS:
                    for inner in (value.values() if isinstance(value, dict) else value):
                        if _part(inner):
                            walk(inner)
            elif value is not None and _part(value):
                walk(value)

    walk(metric)
    return out


def fallback_counters(metric: Any) -> list[Counter[str]]:
    """The fallback counters (``fallbacks``) of ``metric`` and of every metric it wraps: a smoothed
    or guarded committee member reports its inner metric's fallbacks as its own."""
    return [c for m in inner_metrics(metric) if isinstance(c := getattr(m, "fallbacks", None), Counter)]


def fallback_total(metric: Any, parts: list[Any] | None = None) -> int:
    """How many fallbacks ``metric`` and the metrics it wraps have counted so far: a victim
    batch of a search is cached only when this did not change. A detector's own counters (a
    deterministic abstention on a language it does not read; a detector is known by its class's
    ``is_detector``, as metrics do not import detectors) are not among them; the metrics
    inside it (a committee detector's judges) are. ``parts``: ``inner_metrics(metric)`` walked
    once already (the walk costs far more than the sum, and a search asks before and after every
    batch)."""
    return sum(int(v) for m in (inner_metrics(metric) if parts is None else parts)
               if getattr(type(m), "is_detector", False) is not True
               for v in (getattr(m, "fallbacks", None) or {}).values())


def failure_marks(*metrics: Any) -> FailureMarks:
    """Where every ``failed_requests`` list in the stacks of ``metrics`` ends now (see the module
    doc); a metric two stacks share (a victim that is also the gold) is marked once."""
    logs = {id(log): log for metric in metrics for m in inner_metrics(metric)
            if isinstance(log := getattr(m, "failed_requests", None), list)}
    return [(log, len(log)) for log in logs.values()]


def failed_since(marks: FailureMarks, *metrics: Any) -> Counter[str]:
    """Per sample id, how many failed requests were recorded after ``marks`` were taken. With
    ``metrics`` (those the marks were taken of), also every failure of a part they hold now that
    did not exist then: a judge built on first use (AdvEval's gold for a task) records its
    first sample's failures in a list no mark knew."""
    known = {id(log) for log, _ in marks}
    fresh = [(log, 0) for log, _ in failure_marks(*metrics) if id(log) not in known] if metrics else []
    return Counter(i for log, n in (*marks, *fresh) for i in log[n:])


def forget_failures(marks: FailureMarks) -> None:
    """Drop what was recorded after ``marks``: failures of work that is not the scored samples'
    (a committee's calibration set, whose ids may be the same as theirs)."""
    for log, n in marks:
        del log[n:]


def relabel_failures(marks: FailureMarks, ids: dict[str, str]) -> None:
    """Rename what was recorded after ``marks`` by ``ids`` (a stand-in id -> the caller's id):
    work done under ids of its own (a detector's) is recorded under the ids its caller knows."""
    for log, n in marks:
        log[n:] = [ids.get(i, i) for i in log[n:]]


def retry_note(count: int, what: str, names: list[str] | tuple[str, ...] = ()) -> str:
    """The one sentence ``score``, ``attack`` and ``compare`` print about results that rest on a
    failed LLM request: how many of ``what`` (up to five ``names``), why they hold the midpoint,
    and that a resume asks again for exactly those."""
    shown = f" ({', '.join(map(str, names[:5]))}{', ...' if len(names) > 5 else ''})" if names else ""
    return (f"{count} {what}{shown} rest on a failed LLM request scored at the midpoint "
            "(on_llm_error: midpoint): rerun the same command with --resume to ask again for exactly those")
