"""The small rated dataset robusteval ships for its offline quickstart (package data).

Written for robusteval, not taken from any corpus: 20 short dialogues, each with a human
reference reply and three candidate replies rated 1-5 overall by the author, and 12 short news
paragraphs, each with a reference summary and three candidate summaries rated 1-5. The ratings
reward relevant, specific, faithful text and punish off-topic, generic, copied or
contradicting text. It is meant for demos and tests, not for meta-evaluation claims.
"""

from __future__ import annotations

from pathlib import Path

from robusteval.data.base import DatasetInfo, iter_jsonl, need, register_dataset
from robusteval.errors import DataFormatError
from robusteval.types import HumanScale, Sample

PACKAGED = "package:"
OVERALL = {"overall": HumanScale(1, 5)}


def _load(path: Path, dataset: str, task: str, candidates: str, id_key: str) -> list[Sample]:
    """One sample per rated candidate; dialogues carry ``context`` turns, summaries a ``source``."""
    samples = []
    for line, rec in iter_jsonl(path):
        rid = need(rec, "id", path, line)
        context = (tuple(need(rec, "context", path, line, list)) if task == "dialogue"
                   else (need(rec, "source", path, line),))
        reference = need(rec, "reference", path, line)
        for j, pair in enumerate(need(rec, candidates, path, line, list)):
            if not (isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str)
                    and isinstance(pair[1], int | float) and 1 <= pair[1] <= 5):
                raise DataFormatError(path, f"{candidates}[{j}] must be [text, rating 1-5]", line=line,
                                      field=candidates)
            samples.append(Sample(id=f"{dataset}/{rid}/{j}", task=task, response=pair[0], context=context,
                                  reference=reference, human={"overall": float(pair[1])},
                                  meta={"dataset": dataset, id_key: rid,
                                        "scales": {"overall": OVERALL["overall"].to_dict()}}))
    return samples


@register_dataset(DatasetInfo(
    "quickstart-dialogue", PACKAGED + "quickstart/dialogues.jsonl", "dialogue",
    "robusteval's own 20 dialogues x 3 rated replies (+ a reference reply each), shipped with the package",
    OVERALL, "robusteval (written for the quickstart)",
))
def load_dialogues(path: Path) -> list[Sample]:
    return _load(path, "quickstart-dialogue", "dialogue", "responses", "context_id")


@register_dataset(DatasetInfo(
    "quickstart-summary", PACKAGED + "quickstart/summaries.jsonl", "summarization",
    "robusteval's own 12 news paragraphs x 3 rated summaries (+ a reference each), shipped with the package",
    OVERALL, "robusteval (written for the quickstart)",
))
def load_summaries(path: Path) -> list[Sample]:
    return _load(path, "quickstart-summary", "summarization", "summaries", "doc_id")
