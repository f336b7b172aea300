"""USR-PersonaChat in its original per-annotator JSON (Mehri & Eskenazi, 2020, "USR")."""

from __future__ import annotations

from pathlib import Path
from statistics import mean

from robusteval.data.base import (
    DatasetInfo,
    as_float,
    attach_ground_truth,
    need,
    read_json_records,
    register_dataset,
    split_turns,
)
from robusteval.errors import DataFormatError
from robusteval.types import HumanScale, Sample

# original key -> (robusteval aspect, scale)
USR_PC_ASPECTS = {
    "Understandable": ("understandable", HumanScale(0, 1)),
    "Natural": ("natural", HumanScale(1, 3)),
    "Maintains Context": ("maintains_context", HumanScale(1, 3)),
    "Engaging": ("engaging", HumanScale(1, 3)),
    "Uses Knowledge": ("uses_knowledge", HumanScale(0, 1)),
    "Overall": ("overall", HumanScale(1, 5)),
}


@register_dataset(DatasetInfo(
    "usr-personachat", "llm-eval/pc_usr_data.json", "dialogue",
    "USR PersonaChat original: 60 contexts x 5 responses, 3 annotators; human = annotator mean, "
    "meta.annotations = per-annotator lists; persona lines in `fact`",
    {aspect: scale for aspect, scale in USR_PC_ASPECTS.values()},
    "Mehri & Eskenazi 2020 (USR), shikib.com/usr",
))
def load_usr_personachat(path: Path) -> list[Sample]:
    samples = []
    for ci, (where, ctx) in enumerate(read_json_records(path)):
        context = split_turns(need(ctx, "context", path, where))
        fact = need(ctx, "fact", path, where)
        for ri, resp in enumerate(need(ctx, "responses", path, where, list)):
            text = need(resp, "response", path, where).strip()
            human, per_annotator = {}, {}
            for key, (aspect, _scale) in USR_PC_ASPECTS.items():
                values = need(resp, key, path, where, list)
                if not values:
                    raise DataFormatError(path, "no annotations", line=where,
                                          field=f"responses[{ri}].{key}")
                nums = [as_float(v, path, where, f"responses[{ri}].{key}") for v in values]
                per_annotator[aspect] = nums
                human[aspect] = mean(nums)
            samples.append(Sample(
                id=f"usr-personachat/{ci}/{ri}", task="dialogue", response=text, context=context,
                fact=fact, human=human,
                meta={"dataset": "usr-personachat", "system_id": resp.get("model"),
                      "context_id": ci, "annotations": per_annotator,
                      "annotators": ctx.get("annotators"),
                      "scales": {a: s.to_dict() for a, s in USR_PC_ASPECTS.values()}},
            ))
    return attach_ground_truth(samples, "context_id")
