"""Loaders for the JSON files of UniEval's reproduce/ folder (Zhong et al., 2022).

USR Topical-Chat (Mehri & Eskenazi, 2020), QAGS-CNNDM / QAGS-XSum (Wang et al., 2020) and
SF-RES / SF-HOT (Wen et al., 2015; Novikova et al., 2017) share one layout: a JSON list of
objects with ``source``, ``system_output``, optional ``reference`` / ``context``,
``scores`` {aspect: value}; the ``*_result.json`` variants add ``predict_scores``.
"""

from __future__ import annotations

from pathlib import Path

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

_S = HumanScale


def load_unieval_json(path: Path, name: str, task: str, aspects: dict[str, HumanScale]) -> list[Sample]:
    samples = []
    for i, (where, rec) in enumerate(read_json_records(path)):
        output = need(rec, "system_output", path, where)
        source = need(rec, "source", path, where)
        scores = need(rec, "scores", path, where, dict)
        human = {}
        for aspect in aspects:
            if aspect not in scores:
                raise DataFormatError(path, "missing aspect", line=where, field=f"scores.{aspect}")
            human[aspect] = as_float(scores[aspect], path, where, f"scores.{aspect}")
        meta: dict[str, object] = {"dataset": name, "index": i, "scales": {
            k: v.to_dict() for k, v in aspects.items()}}
        for key in ("doc_id", "system_id"):
            if key in rec:
                meta[key] = rec[key]
        if "predict_scores" in rec:
            meta["unieval_predict"] = rec["predict_scores"]
        if task == "dialogue":
            context = split_turns(source)
            meta["unieval_source"] = source
        else:
            context = (source,)
        if task == "dialogue":
            meta["context_id"] = source
        samples.append(Sample(
            id=f"{name}/{i}", task=task, response=output, context=context,
            reference=rec.get("reference"), fact=rec.get("context") if task == "dialogue" else None,
            human=human, meta=meta,
        ))
    if task == "dialogue":
        samples = attach_ground_truth(samples, "context_id")
    return samples


TOPICAL = {"understandability": _S(0, 1), "naturalness": _S(1, 3), "coherence": _S(1, 3),
           "engagingness": _S(1, 3), "groundedness": _S(0, 1), "overall": _S(1, 5)}
QAGS = {"consistency": _S(0, 1)}
SF = {"informativeness": _S(1, 6), "naturalness": _S(1, 6), "overall": _S(1, 6)}

_SPECS = [
    ("usr-topicalchat", "UniEval/reproduce/data/dialogue/topical_chat.json", "dialogue", TOPICAL,
     "USR Topical-Chat: 60 contexts x 6 systems, 3-annotator means, knowledge fact in `fact`",
     "Mehri & Eskenazi 2020 (USR), via UniEval reproduce/"),
    ("usr-topicalchat-unieval", "UniEval/reproduce/unieval_predict/dialogue/topical_chat_result.json",
     "dialogue", TOPICAL, "USR Topical-Chat with official UniEval predictions in meta.unieval_predict",
     "Zhong et al. 2022 (UniEval) reproduce/unieval_predict"),
    ("qags-cnndm", "UniEval/reproduce/data/fact/qags_cnndm.json", "fact", QAGS,
     "QAGS-CNNDM factual consistency (235)", "Wang et al. 2020 (QAGS)"),
    ("qags-xsum", "UniEval/reproduce/data/fact/qags_xsum.json", "fact", QAGS,
     "QAGS-XSum factual consistency (239)", "Wang et al. 2020 (QAGS)"),
    ("qags-cnndm-unieval", "UniEval/reproduce/unieval_predict/fact/qags_cnndm_result.json", "fact",
     QAGS, "QAGS-CNNDM with official UniEval predictions", "UniEval reproduce/unieval_predict"),
    ("qags-xsum-unieval", "UniEval/reproduce/unieval_predict/fact/qags_xsum_result.json", "fact",
     QAGS, "QAGS-XSum with official UniEval predictions", "UniEval reproduce/unieval_predict"),
    ("sfres", "UniEval/reproduce/data/data2text/sfres.json", "data_to_text", SF,
     "SF-RES data-to-text (1181), source = dialogue act", "Wen et al. 2015 / Novikova et al. 2017"),
    ("sfhot", "UniEval/reproduce/data/data2text/sfhot.json", "data_to_text", SF,
     "SF-HOT data-to-text (875)", "Wen et al. 2015 / Novikova et al. 2017"),
    ("sfres-unieval", "UniEval/reproduce/unieval_predict/data2text/sfres_result.json",
     "data_to_text", SF, "SF-RES with official UniEval predictions", "UniEval reproduce"),
    ("sfhot-unieval", "UniEval/reproduce/unieval_predict/data2text/sfhot_result.json",
     "data_to_text", SF, "SF-HOT with official UniEval predictions", "UniEval reproduce"),
]


def _bind(name: str, task: str, aspects: dict[str, HumanScale]):
    def loader(path: Path) -> list[Sample]:
        return load_unieval_json(path, name, task, aspects)

    return loader


for _name, _path, _task, _aspects, _desc, _src in _SPECS:
    register_dataset(DatasetInfo(_name, _path, _task, _desc, _aspects, _src))(
        _bind(_name, _task, _aspects))
