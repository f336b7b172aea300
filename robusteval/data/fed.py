"""The original FED file (Mehri & Eskenazi, 2020, "Unsupervised Evaluation of Interactive
Dialog with DialoGPT"): 375 turn-level and 125 dialogue-level items, 5 annotators each.

Annotations that are "N/A (...)" strings are left out of the mean and counted in
``meta["na_counts"]``; an aspect with no numeric annotation at all is omitted from
``human`` for that item.
"""

from __future__ import annotations

import re
from pathlib import Path
from statistics import mean

from robusteval.data.base import DatasetInfo, as_float, need, read_json_records, register_dataset
from robusteval.errors import DataFormatError
from robusteval.types import HumanScale, Sample

TURN_ASPECTS = {"Interesting": 2, "Engaging": 2, "Specific": 2, "Relevant": 2, "Correct": 2,
                "Semantically appropriate": 2, "Understandable": 1, "Fluent": 2, "Overall": 4}
DIAL_ASPECTS = {"Coherent": 2, "Error recovery": 2, "Consistent": 1, "Diverse": 2, "Depth": 2,
                "Likeable": 2, "Understanding": 2, "Flexible": 2, "Informative": 2,
                "Inquisitive": 2, "Overall": 4}
_SPEAKER = re.compile(r"^(User|System):\s*")


def _key(aspect: str) -> str:
    return aspect.lower().replace(" ", "_")


def _turns(text: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    turns, speakers = [], []
    for line in text.split("\n"):
        if not line.strip():
            continue
        m = _SPEAKER.match(line)
        speakers.append(m.group(1) if m else "")
        turns.append(line[m.end():].strip() if m else line.strip())
    return tuple(turns), tuple(speakers)


def load_fed(path: Path, level: str) -> list[Sample]:
    aspects = TURN_ASPECTS if level == "turn" else DIAL_ASPECTS
    scales = {_key(a): HumanScale(0, hi) for a, hi in aspects.items()}
    samples = []
    for i, (where, rec) in enumerate(read_json_records(path)):
        is_turn = "response" in rec
        if is_turn != (level == "turn"):
            continue
        annotations = need(rec, "annotations", path, where, dict)
        context, speakers = _turns(need(rec, "context", path, where))
        if is_turn:
            response = _SPEAKER.sub("", need(rec, "response", path, where)).strip()
        else:
            if not context:
                raise DataFormatError(path, "empty dialogue", line=where, field="context")
            context, response = context[:-1], context[-1]
        human, na_counts, per_annotator = {}, {}, {}
        for aspect in aspects:
            values = annotations.get(aspect, [])
            nums = [as_float(v, path, where, f"annotations.{aspect}") for v in values
                    if isinstance(v, int | float) and not isinstance(v, bool)]
            na_counts[_key(aspect)] = len(values) - len(nums)
            per_annotator[_key(aspect)] = nums
            if nums:
                human[_key(aspect)] = mean(nums)
        samples.append(Sample(
            id=f"fed-{level}/{i}", task="dialogue", response=response, context=context,
            human=human,
            meta={"dataset": f"fed-{level}-original", "system_id": rec.get("system"),
                  "speakers": speakers, "annotations": per_annotator, "na_counts": na_counts,
                  "level": level, "scales": {k: v.to_dict() for k, v in scales.items()}},
        ))
    return samples


@register_dataset(DatasetInfo(
    "fed-turn-original", "FED_Replication/fed_data.json", "dialogue",
    "FED original turn level (375): 9 aspects x 5 annotators, speaker tags stripped",
    {_key(a): HumanScale(0, hi) for a, hi in TURN_ASPECTS.items()},
    "Mehri & Eskenazi 2020 (FED), shikib.com/fed_data.json",
))
def load_fed_turn(path: Path) -> list[Sample]:
    return load_fed(path, "turn")


@register_dataset(DatasetInfo(
    "fed-dial-original", "FED_Replication/fed_data.json", "dialogue",
    "FED original dialogue level (125): 11 aspects x 5 annotators; response = last turn",
    {_key(a): HumanScale(0, hi) for a, hi in DIAL_ASPECTS.items()},
    "Mehri & Eskenazi 2020 (FED)", level="dial",
))
def load_fed_dial(path: Path) -> list[Sample]:
    return load_fed(path, "dial")
