"""Sample selections used by attack configs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from robusteval.types import Sample

SELECTIONS = ("all", "best-per-context", "ground-truth", "reference")
REFERENCES = ("dataset", "self")
# system ids that mark a dataset's human ground-truth response
GROUND_TRUTH = frozenset({"original gt", "original ground truth", "ground-truth", "ground_truth", "ground truth", "gt",
                          "human", "reference"})


def select(samples: Sequence[Sample], mode: str = "all", aspect: str | None = None) -> list[Sample]:
    """``all``; ``best-per-context``: per distinct context, the response with the highest
    human score on ``aspect`` (default: the first aspect), first one on ties, in context order;
    ``ground-truth``: per context, the dataset's ground-truth response (``meta["system_id"]``
    naming it, e.g. USR's "Original GT"), the one Vasselli & Watanabe (§3) perturb. A dataset
    that does not mark its ground truth is refused with a clear error; ``reference``: per
    context, the dataset's reference text itself as the response (no human score: it was not
    rated), the texts Hu et al. perturb (2024, App. D.1: "the original texts for
    perturbations, namely the references"). A dataset without references is refused."""
    if mode == "all":
        return list(samples)
    if mode == "reference":
        refs: dict[tuple[str, ...], Sample] = {}
        for s in samples:
            if s.reference is not None and s.reference.strip() and s.context not in refs:
                refs[s.context] = replace(s, id=f"{s.id}#reference", response=s.reference, human={},
                                          meta={**s.meta, "system_id": "reference"})
        if not refs:
            name = next((str(s.meta.get("dataset")) for s in samples if s.meta.get("dataset")), "this dataset")
            raise ValueError(f"select: reference needs samples with a reference text; {name} has none")
        return list(refs.values())
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


def with_reference(samples: Sequence[Sample], mode: str | None = None) -> list[Sample]:
    """Which text a reference-based victim compares with (attack config key ``reference:``).

    ``dataset`` (default): the dataset's own references. ``self``: the selected clean response
    itself, and nothing else -- the setting of AdvEval's R+ baselines (Chen et al. 2024, §4.1,
    Tables 2 and 4: a perturbation of a good response R0 against the ground truth G = R0; the
    paper does not say so in words, robusteval reads it from "adding any perturbation will lead
    to deteriorated score") and of Hu et al.'s non-LLM metrics (2024, App. D.1, Table 21: scores
    of the perturbed texts against the original ones). Applied after selection and
    preprocessing, so the reference is the text the attack starts from."""
    mode = mode or "dataset"
    if mode not in REFERENCES:
        raise ValueError(f"reference must be one of {REFERENCES}, got {mode!r}")
    if mode == "dataset":
        return list(samples)
    return [replace(s, reference=s.response, references=(), meta={**s.meta, "reference": "self"})
            for s in samples]
