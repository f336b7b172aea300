"""Summarization human judgments: SummEval (Fabbri et al., 2021) as the 1600-item JSONL
of the blind-spot repository, and THumB CNN/DM (Kasai et al., 2022)."""

from __future__ import annotations

from pathlib import Path

from robusteval.data.base import DatasetInfo, as_float, iter_jsonl, need, register_dataset
from robusteval.errors import DataFormatError
from robusteval.types import HumanScale, Sample

SUMM_ASPECTS = {a: HumanScale(1, 5) for a in ("coherence", "consistency", "fluency", "relevance")}


@register_dataset(DatasetInfo(
    "summeval", "blindspot_nlg/derived/summeval_1600.jsonl", "summarization",
    "SummEval 1600: 100 CNN/DM docs x 16 systems, expert means; reference = original highlight, "
    "references = 11 references", SUMM_ASPECTS, "Fabbri et al. 2021 (SummEval)",
))
def load_summeval(path: Path) -> list[Sample]:
    samples = []
    for i, (line, rec) in enumerate(iter_jsonl(path)):
        scores = need(rec, "scores", path, line, dict)
        human = {a: as_float(scores.get(a), path, line, f"scores.{a}") for a in SUMM_ASPECTS}
        refs = tuple(need(rec, "references", path, line, list)) if "references" in rec else ()
        doc_id, system_id = need(rec, "doc_id", path, line), need(rec, "system_id", path, line)
        samples.append(Sample(
            id=f"summeval/{doc_id}/{system_id}", task="summarization",
            response=need(rec, "system_output", path, line),
            context=(need(rec, "source", path, line),),
            reference=need(rec, "reference", path, line), references=refs, human=human,
            meta={"dataset": "summeval", "index": i, "doc_id": doc_id, "system_id": system_id,
                  "scales": {k: v.to_dict() for k, v in SUMM_ASPECTS.items()}},
        ))
    return samples


@register_dataset(DatasetInfo(
    "thumb-cnndm", "blindspot_nlg/sum_mt/SUM/THumB/cnndm/cnndm_THumB-1.0.jsonl", "summarization",
    "THumB CNN/DM (1800): expert means of coherence/consistency/fluency/relevance; references "
    "from cnndm_references.jsonl beside it; no source article", SUMM_ASPECTS,
    "Kasai et al. 2022 (THumB)",
))
def load_thumb(path: Path) -> list[Sample]:
    ref_path = path.with_name("cnndm_references.jsonl")
    refs: dict[str, tuple[str, ...]] = {}
    if ref_path.is_file():
        for line, rec in iter_jsonl(ref_path):
            refs[str(need(rec, "seg_id", ref_path, line))] = tuple(need(rec, "refs", ref_path, line, list))
    samples = []
    for i, (line, rec) in enumerate(iter_jsonl(path)):
        seg = str(need(rec, "seg_id", path, line))
        human = {a: as_float(rec.get(a), path, line, a) for a in SUMM_ASPECTS}
        experts = need(rec, "expert_annotations", path, line, list)
        if not experts:
            raise DataFormatError(path, "no expert annotations", line=line, field="expert_annotations")
        if "human_score" in rec:
            human["human_score"] = as_float(rec["human_score"], path, line, "human_score")
        r = refs.get(seg, ())
        samples.append(Sample(
            id=f"thumb-cnndm/{seg}/{need(rec, 'SYS', path, line)}", task="summarization",
            response=need(rec, "hyp", path, line), reference=r[0] if r else None, references=r[1:],
            human=human,
            meta={"dataset": "thumb-cnndm", "index": i, "doc_id": seg, "system_id": rec["SYS"],
                  "set_id": rec.get("set_id"),
                  "expert_annotations": experts,
                  "scales": {k: v.to_dict() for k, v in SUMM_ASPECTS.items()}},
        ))
    return samples
