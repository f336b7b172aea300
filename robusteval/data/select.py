"""Sample selections used by attack configs."""

from __future__ import annotations

from collections.abc import Sequence

from robusteval.types import Sample

SELECTIONS = ("all", "best-per-context", "ground-truth")
# system ids that mark a dataset's human ground-truth response
GROUND_TRUTH = frozenset({"original gt", "ground-truth", "ground_truth", "gt", "human", "reference"})


def select(samples: Sequence[Sample], mode: str = "all", aspect: str | None = None) -> list[Sample]:
    """``all``; ``best-per-context``: per distinct context, the response with the highest
    human score on ``aspect`` (default: the first aspect), first one on ties, in context order;
    ``ground-truth``: per context, the dataset's ground-truth response (``meta["system_id"]``
    naming it, e.g. USR's "Original GT"), the one Vasselli & Watanabe (§3) perturb. A dataset
    that does not mark its ground truth is refused with a clear error."""
    if mode == "all":
        return list(samples)
    if mode == "ground-truth":
        picked: dict[tuple[str, ...], Sample] = {}
        for s in samples:
            if str(s.meta.get("system_id", "")).strip().lower() in GROUND_TRUTH:
                picked.setdefault(s.context, s)
        if not picked:
            name = next((str(s.meta.get("dataset")) for s in samples if s.meta.get("dataset")), "this dataset")
            raise ValueError(f"select: ground-truth needs samples whose system_id marks the ground truth "
                             f"({', '.join(sorted(GROUND_TRUTH))}); {name} marks none (DailyDialog-Zhao's "
                             "csv has no system column): use best-per-context")
        return list(picked.values())
    if mode != "best-per-context":
        raise ValueError(f"selection must be one of {SELECTIONS}, got {mode!r}")
    best: dict[tuple[str, ...], Sample] = {}
    for s in samples:
        key = aspect or next(iter(s.human), None)
        if key is None or key not in s.human:
            continue
        cur = best.get(s.context)
        if cur is None or s.human[key] > cur.human[key]:
            best[s.context] = s
    return list(best.values())
